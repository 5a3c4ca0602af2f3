//! Rate limiting of bot sends and edits: sliding windows per chat and per bot, switched on
//! with `enforce_rate_limits`, plus injected 429s that apply regardless.

use std::collections::{HashMap, VecDeque};

use tokio::time::Instant;

use super::types::{Rate, RateLimits};

/// The limiter's state.
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    pub(crate) limits: RateLimits,
    pub(crate) enforce: bool,
    /// Sends/edits still to fail with 429, and the `retry_after` they carry.
    injected: Option<(usize, u64)>,
    per_chat: HashMap<i64, VecDeque<Instant>>,
    total: VecDeque<Instant>,
}

impl Limiter {
    /// Makes the next `count` sends/edits fail with `retry_after` seconds (at least 1).
    pub(crate) fn inject(&mut self, count: usize, retry_after: u64) {
        self.injected = (count > 0).then_some((count, retry_after.max(1)));
    }

    /// Admits one send/edit to `chat` at `now`, or answers the `retry_after` (seconds, at
    /// least 1) of a 429. Admitted calls are remembered; refused ones are not.
    pub(crate) fn admit(&mut self, chat: i64, group: bool, now: Instant) -> Result<(), u64> {
        if let Some((count, retry_after)) = self.injected {
            self.injected = (count > 1).then_some((count - 1, retry_after));
            return Err(retry_after);
        }
        if !self.enforce {
            return Ok(());
        }
        let chat_rate = if group {
            self.limits.group_chat
        } else {
            self.limits.private_chat
        };
        let window = self.per_chat.entry(chat).or_default();
        let wait_chat = wait(window, chat_rate, now);
        let wait_total = wait(&mut self.total, self.limits.bot_total, now);
        match wait_chat.max(wait_total) {
            Some(seconds) => Err(seconds),
            None => {
                window.push_back(now);
                self.total.push_back(now);
                Ok(())
            }
        }
    }
}

/// Drops expired entries of `window`; `Some(seconds)` if `rate` admits no more now.
fn wait(window: &mut VecDeque<Instant>, rate: Rate, now: Instant) -> Option<u64> {
    while window
        .front()
        .is_some_and(|&t| now.saturating_duration_since(t) >= rate.per)
    {
        window.pop_front();
    }
    let full = window.len() >= usize::try_from(rate.max).unwrap_or(usize::MAX);
    if !full {
        return None;
    }
    let free_at = window.front().map_or(now, |&t| t + rate.per);
    let millis = free_at.saturating_duration_since(now).as_millis();
    Some(
        u64::try_from(millis.div_ceil(1000))
            .unwrap_or(u64::MAX)
            .max(1),
    )
}
