//! The timestamps the store writes into transcripts: ISO 8601 UTC with milliseconds, and
//! read back as milliseconds since the epoch.

/// The current time as ISO 8601 UTC with milliseconds (`2025-01-02T03:04:05.678Z`).
pub(crate) fn now_iso() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Parses an ISO 8601 timestamp to milliseconds since the epoch.
pub(crate) fn iso_to_ms(iso: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(iso).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_have_millis_and_parse_back() {
        let iso = now_iso();
        assert!(iso.ends_with('Z') && iso.len() == 24, "{iso}");
        assert!(iso_to_ms(&iso).is_some());
    }
}
