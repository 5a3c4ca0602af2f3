//! Holds on cursors: a message the sink refused keeps its cursor (its channel's, or its
//! thread's) below it, so that taking a later message of the same chat (live, or further on
//! in a catch-up) does not move the cursor past it and the next catch-up reads it again.
//!
//! Kept in memory only: after a restart the saved cursor is below the refused message
//! anyway. A hold ends when the refused message is taken, or after [`HOLD_MAX`] (the
//! catch-up reads no further back), so a message that never comes again cannot pin a cursor.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How far back the catch-up reads, and so how long a refused message holds its cursor.
pub const HOLD_MAX: Duration = Duration::from_secs(24 * 60 * 60);
/// Cursors held at most (past that, expired holds go, then all of them).
const MAX_HELD: usize = 10_000;

/// Per cursor name, the oldest refused message (µs) and since when it holds.
#[derive(Default)]
pub struct Holds {
    held: Mutex<HashMap<String, (i64, Instant)>>,
}

impl Holds {
    /// Notes that the message at `at` (µs) was refused: cursor `name` stays below it until
    /// it is taken.
    pub fn hold(&self, name: &str, at: i64) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.len() >= MAX_HELD && !held.contains_key(name) {
            held.retain(|_, (_, since)| since.elapsed() <= HOLD_MAX);
            if held.len() >= MAX_HELD {
                held.clear();
            }
        }
        let oldest = held.entry(name.to_string()).or_insert((at, Instant::now()));
        if at < oldest.0 {
            oldest.0 = at;
        }
    }

    /// How far taking the message at `at` may raise cursor `name`: to `at`, or to just
    /// below a refused message (taking the refused one itself lifts the hold).
    pub fn allowed(&self, name: &str, at: i64) -> i64 {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.get(name).copied() {
            Some((refused, since)) if refused == at || since.elapsed() > HOLD_MAX => {
                held.remove(name);
                at
            }
            Some((refused, _)) if refused < at => refused.saturating_sub(1),
            _ => at,
        }
    }

    /// Whether cursor `name` is held.
    pub fn is_held(&self, name: &str) -> bool {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_message_holds_the_cursor_below_it_until_it_is_taken() {
        let holds = Holds::default();
        assert_eq!(holds.allowed("c", 100), 100);
        holds.hold("c", 105);
        holds.hold("c", 107);
        assert_eq!(holds.allowed("c", 110), 104, "not past the oldest refused");
        assert_eq!(holds.allowed("c", 103), 103, "below it: as asked");
        assert_eq!(holds.allowed("other", 110), 110, "one cursor only");
        assert_eq!(holds.allowed("c", 105), 105, "taken: the hold is lifted");
        assert!(!holds.is_held("c"));
        assert_eq!(holds.allowed("c", 110), 110);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_ends_when_the_catch_up_could_no_longer_read_the_message() {
        let holds = Holds::default();
        holds.hold("c", 105);
        assert_eq!(holds.allowed("c", 110), 104);
        tokio::time::advance(HOLD_MAX + Duration::from_secs(1)).await;
        assert_eq!(holds.allowed("c", 120), 120, "the hold expired");
        assert!(!holds.is_held("c"));
    }
}
