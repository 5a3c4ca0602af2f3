//! Rate limiting of bot message sends and edits: a sliding window per channel, switched on
//! with `enforce_rate_limits`, plus injected 429s that apply regardless.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

/// What is left of a channel's rate-limit window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Quota {
    /// Calls per window.
    pub(crate) limit: u32,
    /// Calls left in the window.
    pub(crate) remaining: u32,
    /// Seconds until the oldest call leaves the window.
    pub(crate) reset_after: f64,
}

/// The limiter's state.
#[derive(Debug)]
pub(crate) struct Limiter {
    /// Sends and edits a channel admits per window.
    pub(crate) max: u32,
    /// The sliding window.
    pub(crate) per: Duration,
    pub(crate) enforce: bool,
    /// Sends/edits still to fail with 429, and the `retry_after` they carry.
    injected: Option<(usize, f64)>,
    per_channel: HashMap<u64, VecDeque<Instant>>,
    /// How many 429s were answered.
    pub(crate) refused: usize,
    /// Per channel: until when the last 429 asked the bot to wait.
    blocked_until: HashMap<u64, Instant>,
    /// Sends/edits that came before the `retry_after` of an earlier 429 had passed.
    pub(crate) early: usize,
}

impl Default for Limiter {
    fn default() -> Limiter {
        Limiter {
            max: 5,
            per: Duration::from_secs(5),
            enforce: false,
            injected: None,
            per_channel: HashMap::new(),
            refused: 0,
            blocked_until: HashMap::new(),
            early: 0,
        }
    }
}

impl Limiter {
    /// Makes the next `count` sends/edits fail with `retry_after` seconds.
    pub(crate) fn inject(&mut self, count: usize, retry_after: f64) {
        self.injected = (count > 0).then_some((count, retry_after.max(0.0)));
    }

    /// Admits one send/edit in `channel` at `now`, or answers the `retry_after` seconds of a
    /// 429. Admitted calls are remembered; refused ones are not.
    pub(crate) fn admit(&mut self, channel: u64, now: Instant) -> Result<(), f64> {
        if self.blocked_until.get(&channel).is_some_and(|&t| now < t) {
            self.early += 1;
        }
        let refused = self.decide(channel, now);
        if let Err(retry_after) = refused {
            self.refused += 1;
            let until = now + Duration::from_secs_f64(retry_after);
            self.blocked_until.insert(channel, until);
        }
        refused
    }

    /// With limits enforced: what is left of `channel`'s window after the calls so far (the
    /// `x-ratelimit-remaining` and `-reset-after` a successful call carries).
    pub(crate) fn quota(&self, channel: u64, now: Instant) -> Option<Quota> {
        if !self.enforce {
            return None;
        }
        let window = self.per_channel.get(&channel)?;
        let used = u32::try_from(window.len()).unwrap_or(u32::MAX);
        let reset_after = window.front().map_or(0.0, |&t| {
            (t + self.per).saturating_duration_since(now).as_secs_f64()
        });
        Some(Quota {
            limit: self.max,
            remaining: self.max.saturating_sub(used),
            reset_after: (reset_after * 1000.0).ceil() / 1000.0,
        })
    }

    fn decide(&mut self, channel: u64, now: Instant) -> Result<(), f64> {
        if let Some((count, retry_after)) = self.injected {
            self.injected = (count > 1).then_some((count - 1, retry_after));
            return Err(retry_after);
        }
        if !self.enforce {
            return Ok(());
        }
        let window = self.per_channel.entry(channel).or_default();
        while window
            .front()
            .is_some_and(|&t| now.saturating_duration_since(t) >= self.per)
        {
            window.pop_front();
        }
        if window.len() < usize::try_from(self.max).unwrap_or(usize::MAX) {
            window.push_back(now);
            return Ok(());
        }
        let free_at = window.front().map_or(now, |&t| t + self.per);
        let wait = free_at.saturating_duration_since(now).as_secs_f64();
        // Discord gives milliseconds; never 0, which would invite a busy retry.
        Err(((wait * 1000.0).ceil() / 1000.0).max(0.001))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn five_per_five_seconds_per_channel() {
        let mut limiter = Limiter {
            enforce: true,
            ..Limiter::default()
        };
        let start = Instant::now();
        for _ in 0..5 {
            assert!(limiter.admit(1, start).is_ok());
        }
        let wait = limiter
            .admit(1, start + Duration::from_secs(1))
            .unwrap_err();
        assert!((wait - 4.0).abs() < 0.01, "{wait}");
        assert!(
            limiter.admit(2, start).is_ok(),
            "other channels are separate"
        );
        assert!(limiter.admit(1, start + Duration::from_secs(5)).is_ok());
    }

    #[test]
    fn injected_failures_come_first_and_run_out() {
        let mut limiter = Limiter::default();
        limiter.inject(2, 1.5);
        let now = Instant::now();
        assert_eq!(limiter.admit(1, now), Err(1.5));
        assert_eq!(limiter.admit(2, now), Err(1.5));
        assert_eq!(limiter.admit(1, now), Ok(()));
        assert_eq!(limiter.refused, 2);
    }

    #[test]
    fn calls_inside_a_429s_wait_are_counted_as_early() {
        let mut limiter = Limiter::default();
        limiter.inject(1, 2.0);
        let now = Instant::now();
        assert_eq!(limiter.admit(1, now), Err(2.0));
        assert!(limiter.admit(2, now).is_ok(), "other channels are free");
        assert!(limiter.admit(1, now + Duration::from_millis(1_999)).is_ok());
        assert_eq!(limiter.early, 1);
        assert!(limiter.admit(1, now + Duration::from_secs(2)).is_ok());
        assert_eq!(limiter.early, 1);
    }

    #[test]
    fn a_quota_counts_down_and_says_when_a_call_frees() {
        let mut limiter = Limiter {
            enforce: true,
            ..Limiter::default()
        };
        let start = Instant::now();
        assert!(limiter.admit(1, start).is_ok());
        let quota = limiter.quota(1, start).unwrap();
        assert_eq!((quota.limit, quota.remaining), (5, 4));
        for _ in 0..4 {
            assert!(limiter.admit(1, start).is_ok());
        }
        let quota = limiter.quota(1, start + Duration::from_secs(2)).unwrap();
        assert_eq!(quota.remaining, 0);
        assert!((quota.reset_after - 3.0).abs() < 0.01, "{quota:?}");
        limiter.enforce = false;
        assert_eq!(limiter.quota(1, start), None);
    }
}
