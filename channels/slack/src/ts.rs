//! Slack's message timestamps (`"1700000000.000100"`: seconds and a six-digit sequence),
//! which are also message ids, as integers that order the same way (the store's cursors).

/// `"1700000000.000100"` -> 1_700_000_000_000_100; `None` when it is no Slack timestamp.
pub fn to_micros(ts: &str) -> Option<i64> {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    if secs.is_empty()
        || frac.len() > 6
        || !secs.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: i64 = secs.parse().ok()?;
    let frac: i64 = format!("{frac:0<6}").parse().ok()?;
    secs.checked_mul(1_000_000)?.checked_add(frac)
}

/// The inverse of [`to_micros`].
pub fn from_micros(micros: i64) -> String {
    format!(
        "{}.{:06}",
        micros.div_euclid(1_000_000),
        micros.rem_euclid(1_000_000)
    )
}

/// Milliseconds since the Unix epoch of a timestamp (0 when it is none).
pub fn to_millis(ts: &str) -> u64 {
    to_micros(ts).map_or(0, |m| u64::try_from(m / 1_000).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_keep_their_order() {
        assert_eq!(to_micros("1700000000.000100"), Some(1_700_000_000_000_100));
        assert_eq!(from_micros(1_700_000_000_000_100), "1700000000.000100");
        assert!(to_micros("1700000000.000099") < to_micros("1700000000.000100"));
        assert_eq!(to_micros("1700000000"), Some(1_700_000_000_000_000));
        assert_eq!(to_millis("1700000000.123456"), 1_700_000_000_123);
        for bad in ["", "x.1", "1.1234567", "-1.0", "1.-2"] {
            assert_eq!(to_micros(bad), None, "{bad}");
        }
    }
}
