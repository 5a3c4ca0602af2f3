//! `[heartbeat]`: a periodic turn (a job with id `heartbeat`) whose prompt asks the model to
//! read `HEARTBEAT.md`; an answer that is only `HEARTBEAT_OK` (or `NO_REPLY`) sends nothing.

use crate::config::Config;
use crate::domain::schedule::{Missed, Schedule};
use crate::store::{CronJob, CronOrigin};

/// The heartbeat job's id.
pub const HEARTBEAT_ID: &str = "heartbeat";
/// The answer that means "nothing to report".
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";
/// The sender name of a heartbeat turn (how the runner knows one).
pub const HEARTBEAT_SENDER: &str = "chela:heartbeat";

/// Whether a heartbeat's final `text` says nothing to deliver: only `HEARTBEAT_OK` or
/// `NO_REPLY` (surrounding blanks aside).
pub fn is_heartbeat_ok(text: &str) -> bool {
    let t = text.trim();
    t.eq_ignore_ascii_case(HEARTBEAT_OK) || t.eq_ignore_ascii_case(crate::reply::stream::NO_REPLY)
}

/// The heartbeat job `config` asks for, its first beat one interval after `now_ms`; `None`
/// when there is no heartbeat (or it does not parse: the config check refused that).
pub(super) fn job(
    config: &Config,
    session_key: String,
    target: Option<chela_channel::Conversation>,
    now_ms: u64,
) -> Option<CronJob> {
    let hb = &config.heartbeat;
    if !hb.enabled() {
        return None;
    }
    let schedule = Schedule::every(&hb.every, now_ms).ok()?;
    let next_ms = schedule.next_after(now_ms).ok()?;
    Some(CronJob {
        id: HEARTBEAT_ID.to_owned(),
        schedule,
        session_key,
        isolated: false,
        target,
        message: hb.prompt.clone(),
        // A beat missed while down is not worth a late one.
        missed: Missed::Skip,
        origin: CronOrigin::Heartbeat,
        created_ms: now_ms,
        next_ms,
        last_ms: None,
        active_hours: hb.hours().ok().flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_ok_or_no_reply_is_silent() {
        assert!(is_heartbeat_ok("HEARTBEAT_OK"));
        assert!(is_heartbeat_ok("  HEARTBEAT_OK\n"));
        assert!(is_heartbeat_ok("NO_REPLY"));
        assert!(!is_heartbeat_ok("HEARTBEAT_OK, but the build is red"));
        assert!(!is_heartbeat_ok("The build is red."));
        assert!(!is_heartbeat_ok(""));
    }
}
