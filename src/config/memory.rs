//! `[memory]`: the agent's durable notes in the workspace (`MEMORY.md`, `memory/*.md`) and
//! the silent turn before a compaction that lets it save what matters (docs/memory.md).

use serde::{Deserialize, Serialize};

/// `[memory]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Before a compaction that summarizes older turns, run one silent turn in which the
    /// model may write durable notes with its file tools (its text is not sent).
    pub flush: bool,
    /// The IANA zone of "today" in the daily note's name `memory/YYYY-MM-DD.md` (empty: the
    /// host's).
    pub tz: String,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            flush: true,
            tz: String::new(),
        }
    }
}

impl MemoryConfig {
    /// Checks `tz`; the error names the key and what is wrong.
    pub fn check(&self) -> Result<(), (String, String)> {
        let tz = self.tz.trim();
        if tz.is_empty() || jiff::tz::TimeZone::get(tz).is_ok() {
            return Ok(());
        }
        let reason = match crate::domain::schedule::unknown_zone(tz) {
            missing @ crate::domain::schedule::ScheduleError::NoZoneDatabase(_) => {
                missing.to_string()
            }
            _ => format!("{tz:?} is not a known IANA time zone like \"Europe/Berlin\""),
        };
        Err(("memory.tz".to_owned(), reason))
    }

    /// Today's date (`YYYY-MM-DD`) in `tz` (the host's zone when empty or unknown).
    pub fn today(&self) -> String {
        let tz = self.tz.trim();
        let zone = if tz.is_empty() {
            jiff::tz::TimeZone::system()
        } else {
            jiff::tz::TimeZone::get(tz).unwrap_or_else(|_| jiff::tz::TimeZone::system())
        };
        jiff::Timestamp::now()
            .to_zoned(zone)
            .date()
            .strftime("%Y-%m-%d")
            .to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn zones_are_checked_and_today_is_a_date() {
        let mut c = MemoryConfig::default();
        assert!(c.check().is_ok());
        c.tz = "Europe/Berlin".into();
        assert!(c.check().is_ok());
        let today = c.today();
        assert_eq!(today.len(), 10, "{today}");
        assert!(jiff::civil::Date::strptime("%Y-%m-%d", &today).is_ok());
        c.tz = "Mars/Olympus".into();
        assert_eq!(c.check().unwrap_err().0, "memory.tz");
    }
}
