//! Every duration in the config, bounded at load: a timeout or grace period at most a day, an
//! idle time, TTL or interval at most a year. A value past its bound is refused with an error
//! naming the key, so no deadline computed from the config (`Instant + Duration`, seconds
//! turned into milliseconds) can overflow or panic. A key that takes a duration is listed
//! here and nowhere else (`durations_are_all_bounded` in the config tests checks the list).

use std::time::Duration;

use super::Config;
use crate::domain::schedule::Schedule;

/// The most a timeout or grace period may be: one day.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The most an idle time, a TTL or an interval may be: one year (365 days).
pub const MAX_SPAN: Duration = Duration::from_secs(365 * 24 * 3600);

/// One duration of the config: its dotted key, its value and its bound.
struct Bounded {
    key: String,
    value: Duration,
    max: Duration,
    /// How the bound reads in the key's own unit (`86400 s`, `1 day`).
    max_text: String,
}

impl Bounded {
    fn secs(key: &str, value: u64, max: Duration) -> Bounded {
        Bounded {
            key: key.to_owned(),
            value: Duration::from_secs(value),
            max,
            max_text: format!("{} (seconds)", max.as_secs()),
        }
    }

    fn millis(key: &str, value: u64, max: Duration) -> Bounded {
        Bounded {
            key: key.to_owned(),
            value: Duration::from_millis(value),
            max,
            max_text: format!("{} (milliseconds)", max.as_millis()),
        }
    }

    fn span(key: String, value: Duration, max: Duration) -> Bounded {
        Bounded {
            key,
            value,
            max,
            // As a duration is written there: `365days`.
            max_text: format!("{}days", max.as_secs() / (24 * 3600)),
        }
    }
}

/// Checks every duration of `config` against its bound: `Err((key, message))` names the
/// first key past it.
pub fn check(config: &Config) -> Result<(), (String, String)> {
    for d in all(config) {
        if d.value > d.max {
            return Err((d.key, format!("must be at most {}", d.max_text)));
        }
    }
    Ok(())
}

/// The keys `check` bounds (for the docs' test).
#[cfg(test)]
pub fn keys(config: &Config) -> Vec<String> {
    all(config).into_iter().map(|d| d.key).collect()
}

fn all(config: &Config) -> Vec<Bounded> {
    let day = MAX_TIMEOUT;
    let year = MAX_SPAN;
    let mut out = vec![
        Bounded::secs("model.idle_timeout_s", config.model.idle_timeout_s, day),
        Bounded::secs("agent.timeout_s", config.agent.timeout_s, day),
        Bounded::secs("agent.shutdown_grace_s", config.agent.shutdown_grace_s, day),
        Bounded::millis("queue.debounce_ms", config.queue.debounce_ms, day),
        Bounded::millis("queue.max_debounce_ms", config.queue.max_debounce_ms, day),
        Bounded::secs("tools.exec_timeout_s", config.tools.exec_timeout_s, day),
        Bounded::secs(
            "tools.approval_timeout_s",
            config.tools.approval_timeout_s,
            day,
        ),
        Bounded::secs("tools.web.timeout_s", config.tools.web.timeout_s, day),
        Bounded::secs(
            "tools.browser.timeout_s",
            config.tools.browser.timeout_s,
            day,
        ),
        Bounded::secs("acp.ask_timeout_s", config.acp.ask_timeout_s, day),
        Bounded::secs("acp.binding_idle_s", config.acp.binding_idle_s, year),
        Bounded::secs("acp.process_idle_s", config.acp.process_idle_s, year),
        Bounded::secs(
            "channels.telegram.poll_timeout_s",
            config.channels.telegram.poll_timeout_s,
            day,
        ),
        Bounded::secs("cluster.lease_s", config.cluster.lease_s, day),
        Bounded::secs("mcp.startup_timeout_s", config.mcp.startup_timeout_s, day),
        Bounded::secs("mcp.call_timeout_s", config.mcp.call_timeout_s, day),
    ];
    for (list, hooks) in config.hooks.lists() {
        for (i, hook) in hooks.iter().enumerate() {
            let key = format!("hooks.{list}[{i}].timeout_s");
            out.push(Bounded::secs(&key, hook.timeout_s, day));
        }
    }
    // A TTL or interval that does not parse is refused by its own check, with its grammar.
    if let Ok(ttl) = humantime::parse_duration(config.delivery.ttl.trim()) {
        out.push(Bounded::span("delivery.ttl".to_owned(), ttl, year));
    }
    let every = |text: &str| match Schedule::every(text, 0) {
        Ok(Schedule::Every { every_ms, .. }) => Some(Duration::from_millis(every_ms)),
        _ => None,
    };
    for (n, entry) in config.cron.iter().enumerate() {
        if let Some(value) = every(&entry.every).filter(|_| !entry.every.trim().is_empty()) {
            out.push(Bounded::span(format!("cron[{n}].every"), value, year));
        }
    }
    if let Some(value) = every(&config.heartbeat.every).filter(|_| config.heartbeat.enabled()) {
        out.push(Bounded::span("heartbeat.every".to_owned(), value, year));
    }
    out
}

#[cfg(test)]
#[path = "durations_tests.rs"]
mod tests;
