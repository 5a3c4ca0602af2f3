//! When a scheduled job runs: five-field cron expressions in an IANA time zone (on `croner`
//! and `jiff`), one-shot times and fixed intervals. Pure functions of epoch milliseconds, so
//! the scheduler and its tests bring their own clock.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("bad cron expression `{expr}`: {reason}")]
    Cron {
        /// The expression as given.
        expr: String,
        /// What the parser said.
        reason: String,
    },
    /// The time zone is not in the IANA database.
    #[error("unknown time zone `{0}` (an IANA name such as Europe/Berlin)")]
    TimeZone(String),
    /// A zone was named, but this host has no time zone database to look it up in.
    #[error("time zone `{0}`: {NO_ZONE_DATABASE}")]
    NoZoneDatabase(String),
    /// The one-shot time does not parse.
    #[error("bad time `{0}`: give an RFC 3339 time (2030-01-31T09:00:00+01:00) or `in 20m`")]
    At(String),
    /// The interval does not parse or is too short.
    #[error("bad interval `{0}`: give a duration of at least 1s, such as `30m` or `every 2h`")]
    Every(String),
    /// The active hours do not parse.
    #[error("bad active hours `{0}`: give HH:MM-HH:MM, such as 08:00-22:00")]
    Hours(String),
    /// No next time could be computed (an expression that never matches again).
    #[error("the schedule has no next run")]
    NoNext,
}

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Schedule {
    /// A five-field cron expression (`min hour day-of-month month day-of-week`), read in
    /// time zone `tz` (an IANA name; `None`: the host's zone).
    Cron {
        /// The expression.
        expr: String,
        /// The IANA time zone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
    },
    /// Once, at `at_ms` (ms since the epoch).
    At {
        /// When.
        at_ms: u64,
    },
    /// Every `every_ms`, counted from `anchor_ms`.
    Every {
        /// The interval.
        every_ms: u64,
        /// The start the runs are counted from (the job's creation).
        anchor_ms: u64,
    },
}

/// What happens to a run that fell due while the gateway was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    /// It runs once at the next start (however many runs were missed).
    #[default]
    RunOnce,
    /// It is skipped; the job waits for its next time.
    Skip,
}

impl Schedule {
    /// A cron schedule, checked: the expression parses and the zone exists.
    pub fn cron(expr: &str, tz: Option<&str>) -> Result<Schedule, ScheduleError> {
        let schedule = Schedule::Cron {
            expr: expr.trim().to_owned(),
            tz: tz
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        };
        if let Schedule::Cron { expr, tz } = &schedule {
            parse_cron(expr)?;
            zone(tz.as_deref())?;
        }
        Ok(schedule)
    }

    /// A one-shot schedule from an RFC 3339 time or `in <duration>` (from `now_ms`).
    pub fn at(text: &str, now_ms: u64) -> Result<Schedule, ScheduleError> {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("in ") {
            let d = humantime::parse_duration(rest.trim())
                .map_err(|_| ScheduleError::At(t.to_owned()))?;
            return Ok(Schedule::At {
                at_ms: now_ms.saturating_add(millis(d)),
            });
        }
        let ts = jiff::Timestamp::from_str(t).map_err(|_| ScheduleError::At(t.to_owned()))?;
        let at_ms = u64::try_from(ts.as_millisecond()).map_err(|_| ScheduleError::At(t.into()))?;
        Ok(Schedule::At { at_ms })
    }

    /// An interval schedule from `30m`, `every 2h` and the like, counted from `now_ms`.
    pub fn every(text: &str, now_ms: u64) -> Result<Schedule, ScheduleError> {
        let t = text.trim();
        let d = t.strip_prefix("every ").unwrap_or(t).trim();
        let every_ms = humantime::parse_duration(d)
            .map(millis)
            .map_err(|_| ScheduleError::Every(t.to_owned()))?;
        if every_ms < 1000 {
            return Err(ScheduleError::Every(t.to_owned()));
        }
        Ok(Schedule::Every {
            every_ms,
            anchor_ms: now_ms,
        })
    }

    /// The first run strictly after `after_ms`; `None` when there is none (a one-shot time
    /// that has passed).
    pub fn next_after(&self, after_ms: u64) -> Result<Option<u64>, ScheduleError> {
        match self {
            Schedule::At { at_ms } => Ok((*at_ms > after_ms).then_some(*at_ms)),
            Schedule::Every {
                every_ms,
                anchor_ms,
            } => {
                let every = (*every_ms).max(1);
                if after_ms < *anchor_ms {
                    return Ok(Some(*anchor_ms));
                }
                let k = (after_ms - anchor_ms) / every + 1;
                Ok(Some(anchor_ms.saturating_add(k.saturating_mul(every))))
            }
            Schedule::Cron { expr, tz } => {
                let cron = parse_cron(expr)?;
                let tz = zone(tz.as_deref())?;
                let after = i64::try_from(after_ms).map_err(|_| ScheduleError::NoNext)?;
                let start = jiff::Timestamp::from_millisecond(after)
                    .map_err(|_| ScheduleError::NoNext)?
                    .to_zoned(tz);
                let next = cron
                    .find_next_occurrence(&start, false)
                    .map_err(|_| ScheduleError::NoNext)?;
                Ok(u64::try_from(next.timestamp().as_millisecond()).ok())
            }
        }
    }

    /// A short human description: `cron 30 14 * * 3 (Europe/Berlin)`, `at 2030-...Z`,
    /// `every 30m`.
    pub fn describe(&self) -> String {
        match self {
            Schedule::Cron { expr, tz: Some(tz) } => format!("cron {expr} ({tz})"),
            Schedule::Cron { expr, tz: None } => format!("cron {expr}"),
            Schedule::At { at_ms } => format!("at {}", iso(*at_ms)),
            Schedule::Every { every_ms, .. } => format!(
                "every {}",
                humantime::format_duration(std::time::Duration::from_millis(*every_ms))
            ),
        }
    }

    /// Whether the schedule runs once only.
    pub fn is_one_shot(&self) -> bool {
        matches!(self, Schedule::At { .. })
    }
}

/// `ms` since the epoch as an RFC 3339 UTC time (seconds precision).
pub fn iso(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.round(jiff::Unit::Second).unwrap_or(t).to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// A duration in whole milliseconds (saturating).
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Parses a strict five-field expression (no seconds field).
fn parse_cron(expr: &str) -> Result<croner::Cron, ScheduleError> {
    let fields = expr.split_whitespace().count();
    let err = |reason: String| ScheduleError::Cron {
        expr: expr.to_owned(),
        reason,
    };
    if fields != 5 && !expr.trim_start().starts_with('@') {
        return Err(err(format!("expected 5 fields, found {fields}")));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| err(e.to_string()))
}

/// What a named zone needs when the host has no time zone database (chela reads the
/// system's: the release build bundles none).
pub const NO_ZONE_DATABASE: &str = concat!(
    "this host has no time zone database ",
    "(install the tzdata package, /usr/share/zoneinfo, then restart chela)"
);

/// Why the zone `name` was not found: [`ScheduleError::NoZoneDatabase`] when the host has
/// no time zone database at all (jiff found none in `TZDIR` or its usual folders, such as
/// `/usr/share/zoneinfo`; it looks once per process), else [`ScheduleError::TimeZone`].
pub fn unknown_zone(name: &str) -> ScheduleError {
    unknown_zone_given(name, jiff::tz::db().is_definitively_empty())
}

fn unknown_zone_given(name: &str, no_database: bool) -> ScheduleError {
    if no_database {
        ScheduleError::NoZoneDatabase(name.to_owned())
    } else {
        ScheduleError::TimeZone(name.to_owned())
    }
}

/// The time zone named `tz`, or the host's.
fn zone(tz: Option<&str>) -> Result<jiff::tz::TimeZone, ScheduleError> {
    match tz {
        Some(name) => jiff::tz::TimeZone::get(name).map_err(|_| unknown_zone(name)),
        None => Ok(jiff::tz::TimeZone::system()),
    }
}

/// A daily window of wall-clock time (`08:00-22:00`) in a zone: when heartbeats may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveHours {
    /// Start, minutes after midnight.
    pub start_min: u16,
    /// End (exclusive), minutes after midnight; before `start_min` for a window over midnight.
    pub end_min: u16,
    /// The IANA zone (`None`: the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

impl ActiveHours {
    /// Parses `HH:MM-HH:MM` in zone `tz`.
    pub fn parse(text: &str, tz: Option<&str>) -> Result<ActiveHours, ScheduleError> {
        let bad = || ScheduleError::Hours(text.to_owned());
        let (a, b) = text.trim().split_once('-').ok_or_else(bad)?;
        let minutes = |s: &str| -> Option<u16> {
            let (h, m) = s.trim().split_once(':')?;
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (h <= 24 && m < 60 && h * 60 + m <= 1440).then_some(h * 60 + m)
        };
        let tz = tz.map(str::trim).filter(|t| !t.is_empty());
        zone(tz)?;
        Ok(ActiveHours {
            start_min: minutes(a).ok_or_else(bad)?,
            end_min: minutes(b).ok_or_else(bad)?,
            tz: tz.map(str::to_owned),
        })
    }

    /// Whether `at_ms` falls inside the window.
    pub fn contains(&self, at_ms: u64) -> bool {
        let Ok(tz) = zone(self.tz.as_deref()) else {
            return true;
        };
        let Some(t) = i64::try_from(at_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        else {
            return true;
        };
        let z = t.to_zoned(tz);
        let now =
            u16::try_from(z.hour()).unwrap_or(0) * 60 + u16::try_from(z.minute()).unwrap_or(0);
        if self.start_min <= self.end_min {
            (self.start_min..self.end_min).contains(&now)
        } else {
            now >= self.start_min || now < self.end_min
        }
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
