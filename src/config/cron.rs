//! `[[cron]]` (jobs the operator keeps in the config, seeded into the store at every start)
//! and `[heartbeat]` (a periodic turn that reads `HEARTBEAT.md`). docs/schedules.md.

use serde::{Deserialize, Serialize};

use crate::domain::schedule::{ActiveHours, Missed, Schedule};

/// The default heartbeat prompt.
pub const HEARTBEAT_PROMPT: &str = "Heartbeat: read HEARTBEAT.md in your workspace and do what it asks. If nothing needs the user's attention, answer exactly HEARTBEAT_OK.";

/// Where a job's turns run: a session key, or a chat (`channel` + `chat`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetConfig {
    /// A session key; its answers go where the session last replied.
    pub session: String,
    /// A channel (`telegram`, `discord`), with `chat`.
    pub channel: String,
    /// The channel's account (`default` when empty).
    pub account: String,
    /// The chat id (a Telegram user id for a direct chat).
    pub chat: String,
    /// The chat is a group (else a direct chat).
    pub group: bool,
}

impl TargetConfig {
    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        self.session.trim().is_empty() && self.chat.trim().is_empty()
    }

    /// Checks it: a session, or a channel with a chat.
    fn check(&self, key: &str) -> Result<(), (String, String)> {
        let (session, chat) = (
            !self.session.trim().is_empty(),
            !self.chat.trim().is_empty(),
        );
        match (session, chat) {
            (true, true) => Err((
                key.into(),
                "give `session` or `channel` + `chat`, not both".into(),
            )),
            (false, false) => Err((key.into(), "needs `session` or `channel` + `chat`".into())),
            (false, true) if self.channel.trim().is_empty() => {
                Err((format!("{key}.channel"), "is needed with `chat`".into()))
            }
            _ => Ok(()),
        }
    }
}

/// One `[[cron]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CronEntry {
    /// The job's id (letters, digits, `-`, `_`).
    pub id: String,
    /// A five-field cron expression (or `at`, or `every`).
    pub schedule: String,
    /// The IANA time zone of `schedule` (empty: the host's).
    pub tz: String,
    /// A one-shot RFC 3339 time.
    pub at: String,
    /// An interval (`30m`).
    pub every: String,
    /// The prompt of the job's turn.
    pub message: String,
    /// `run_once` | `skip`: a run missed while the gateway was down.
    pub missed: Missed,
    /// A session key to run in; its answers go where the session last replied.
    pub session: String,
    /// A channel (`telegram`, `discord`) to run in, with `chat`.
    pub channel: String,
    /// The channel's account (`default` when empty).
    pub account: String,
    /// The chat id (a Telegram user id for a direct chat).
    pub chat: String,
    /// The chat is a group (else a direct chat).
    pub group: bool,
    /// It runs in a session of its own (`agent:<a>:cron:<id>`, no chat history); its answers
    /// still go to the chat.
    pub isolated: bool,
}

impl CronEntry {
    /// Where it runs.
    pub fn target(&self) -> TargetConfig {
        TargetConfig {
            session: self.session.clone(),
            channel: self.channel.clone(),
            account: self.account.clone(),
            chat: self.chat.clone(),
            group: self.group,
        }
    }
    /// The entry's schedule (an `every` is counted from `now_ms`).
    pub fn schedule(&self, now_ms: u64) -> Result<Schedule, String> {
        let tz = Some(self.tz.trim()).filter(|t| !t.is_empty());
        let given = [&self.schedule, &self.at, &self.every]
            .iter()
            .filter(|s| !s.trim().is_empty())
            .count();
        if given != 1 {
            return Err("give exactly one of `schedule`, `at`, `every`".into());
        }
        let parsed = if !self.schedule.trim().is_empty() {
            Schedule::cron(&self.schedule, tz)
        } else if !self.at.trim().is_empty() {
            if self.at.trim().starts_with("in ") {
                return Err("`at` in the config takes an RFC 3339 time".into());
            }
            Schedule::at(&self.at, now_ms)
        } else {
            Schedule::every(&self.every, now_ms)
        };
        parsed.map_err(|e| e.to_string())
    }
}

/// `[heartbeat]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeartbeatConfig {
    /// How often (`30m`); empty: no heartbeat.
    pub every: String,
    /// `HH:MM-HH:MM`: beats outside are skipped; empty: always.
    pub active_hours: String,
    /// The IANA zone of `active_hours` (empty: the host's).
    pub tz: String,
    /// The prompt of each beat.
    pub prompt: String,
    /// A session key to run in; its answers go where the session last replied.
    pub session: String,
    /// A channel (`telegram`, `discord`) to run in, with `chat`.
    pub channel: String,
    /// The channel's account (`default` when empty).
    pub account: String,
    /// The chat id (a Telegram user id for a direct chat).
    pub chat: String,
    /// The chat is a group (else a direct chat).
    pub group: bool,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            every: String::new(),
            active_hours: String::new(),
            tz: String::new(),
            prompt: HEARTBEAT_PROMPT.to_owned(),
            session: String::new(),
            channel: String::new(),
            account: String::new(),
            chat: String::new(),
            group: false,
        }
    }
}

impl HeartbeatConfig {
    /// Where it runs.
    pub fn target(&self) -> TargetConfig {
        TargetConfig {
            session: self.session.clone(),
            channel: self.channel.clone(),
            account: self.account.clone(),
            chat: self.chat.clone(),
            group: self.group,
        }
    }
    /// Whether a heartbeat is configured.
    pub fn enabled(&self) -> bool {
        !self.every.trim().is_empty()
    }

    /// The active hours, if any.
    pub fn hours(&self) -> Result<Option<ActiveHours>, String> {
        if self.active_hours.trim().is_empty() {
            return Ok(None);
        }
        let tz = Some(self.tz.trim()).filter(|t| !t.is_empty());
        ActiveHours::parse(&self.active_hours, tz)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// Whether `id` is a valid job id: 1 to 40 of `[A-Za-z0-9_-]`.
pub fn is_valid_job_id(id: &str) -> bool {
    (1..=40).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks `[[cron]]` and `[heartbeat]`: `Err((key, message))` names the key at fault.
pub fn check(cron: &[CronEntry], heartbeat: &HeartbeatConfig) -> Result<(), (String, String)> {
    let mut seen = std::collections::BTreeSet::new();
    for (n, entry) in cron.iter().enumerate() {
        let key = format!("cron[{n}]");
        if !is_valid_job_id(&entry.id) || entry.id == "heartbeat" {
            return Err((
                format!("{key}.id"),
                format!(
                    "{:?} is not a job id (letters, digits, - and _; not `heartbeat`)",
                    entry.id
                ),
            ));
        }
        if !seen.insert(entry.id.as_str()) {
            return Err((format!("{key}.id"), format!("{:?} is used twice", entry.id)));
        }
        if entry.message.trim().is_empty() {
            return Err((format!("{key}.message"), "must not be empty".into()));
        }
        entry.schedule(0).map_err(|e| (key.clone(), e))?;
        entry.target().check(&key)?;
    }
    if heartbeat.enabled() {
        crate::domain::schedule::Schedule::every(&heartbeat.every, 0)
            .map_err(|e| ("heartbeat.every".to_owned(), e.to_string()))?;
        heartbeat
            .hours()
            .map_err(|e| ("heartbeat.active_hours".to_owned(), e))?;
        heartbeat.target().check("heartbeat")?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(id: &str) -> CronEntry {
        CronEntry {
            id: id.into(),
            schedule: "30 14 * * 3".into(),
            tz: "Europe/Berlin".into(),
            message: "weekly report".into(),
            channel: "telegram".into(),
            chat: "42".into(),
            ..CronEntry::default()
        }
    }

    #[test]
    fn entries_are_checked_with_the_key_at_fault() {
        let off = HeartbeatConfig::default();
        assert_eq!(check(&[entry("a"), entry("b")], &off), Ok(()));
        let key = |cron: &[CronEntry], hb: &HeartbeatConfig| check(cron, hb).unwrap_err().0;
        assert_eq!(key(&[entry("a"), entry("a")], &off), "cron[1].id");
        assert_eq!(key(&[entry("bad id")], &off), "cron[0].id");
        let mut two = entry("a");
        two.every = "5m".into();
        assert_eq!(key(&[two], &off), "cron[0]");
        let mut nowhere = entry("a");
        nowhere.chat.clear();
        assert_eq!(key(&[nowhere], &off), "cron[0]");
        let mut relative = entry("a");
        relative.schedule.clear();
        relative.at = "in 5m".into();
        assert_eq!(key(&[relative], &off), "cron[0]");
        let mut hb = HeartbeatConfig {
            every: "30m".into(),
            active_hours: "8-22".into(),
            ..HeartbeatConfig::default()
        };
        hb.session = "agent:main:main".into();
        assert_eq!(key(&[], &hb), "heartbeat.active_hours");
        hb.active_hours = "08:00-22:00".into();
        assert_eq!(check(&[], &hb), Ok(()));
    }
}
