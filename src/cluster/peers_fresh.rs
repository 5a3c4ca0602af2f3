//! Whether a call between nodes (`peers`) is fresh: sent within [`FRESH_WITHIN`]
//! of this node's clock (either way), and not taken before. Every envelope carries its send
//! time and a random nonce inside its signed part, so a copy of a signed call heard on the
//! channel and sent again is dropped: later than the window by its time, within it by the
//! set of the (sender, nonce) pairs seen in the window. The nodes' clocks must agree within
//! a few seconds (NTP). Nothing sent before this node started is taken
//! ([`Seen::since`]): a copy of a call to its previous life is not acted on again.

use std::collections::BTreeSet;

/// How far a call's send time may be from this node's clock, either way.
pub const FRESH_WITHIN_MS: u64 = 30_000;

/// At most this many calls are remembered; past it the oldest is forgotten and no call sent
/// at or before it is taken any more ([`Stale::Crowded`]), so no forgotten call can be taken
/// twice.
pub const SEEN_MOST: usize = 4_096;

/// Why a call was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    /// Its send time is outside the window, or before this node started.
    #[error(
        "sent outside the freshness window or before this node started (a copy, or the nodes' clocks disagree)"
    )]
    Outside,
    /// It was sent no later than a call forgotten for room: more than [`SEEN_MOST`] calls
    /// came within the window.
    #[error("sent no later than a call forgotten for room ({SEEN_MOST} calls in the window)")]
    Crowded,
    /// It was taken before (a copy).
    #[error("taken before (a copy)")]
    Seen,
}

/// The calls taken within the window: (send time, sender, nonce), oldest first.
#[derive(Debug)]
pub struct Seen {
    calls: BTreeSet<(u64, String, String)>,
    /// Calls sent at or before this (ms) are dropped as [`Stale::Outside`]: when this node
    /// started, or the newest call forgotten as out of the window (so a clock stepping
    /// back does not take it again).
    floor: u64,
    /// Calls sent at or before this (ms) are dropped as [`Stale::Crowded`]: the newest call
    /// forgotten for room.
    crowded: u64,
}

impl Seen {
    /// An empty set on a node started at `start` (ms since the epoch): no call sent before
    /// it is taken.
    pub fn since(start: u64) -> Seen {
        Seen {
            calls: BTreeSet::new(),
            floor: start.saturating_sub(1),
            crowded: 0,
        }
    }

    /// Takes in the call sent at `at` by `from` with `nonce`, at `now` (ms since the epoch):
    /// `Ok` when it is fresh (and now remembered).
    pub fn check(&mut self, at: u64, from: &str, nonce: &str, now: u64) -> Result<(), Stale> {
        let oldest = now.saturating_sub(FRESH_WITHIN_MS);
        if at < oldest || at > now.saturating_add(FRESH_WITHIN_MS) || at <= self.floor {
            return Err(Stale::Outside);
        }
        if at <= self.crowded {
            return Err(Stale::Crowded);
        }
        while let Some((t, _, _)) = self.calls.first().filter(|(t, _, _)| *t < oldest) {
            self.floor = self.floor.max(*t);
            self.calls.pop_first();
        }
        if !self.calls.insert((at, from.to_owned(), nonce.to_owned())) {
            return Err(Stale::Seen);
        }
        while self.calls.len() > SEEN_MOST {
            if let Some((t, _, _)) = self.calls.pop_first() {
                self.crowded = self.crowded.max(t);
            }
        }
        Ok(())
    }

    /// How many calls are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn a_call_is_taken_once_and_only_within_the_window() {
        let mut seen = Seen::since(NOW - 60_000);
        assert_eq!(seen.check(NOW - 1_000, "a", "n1", NOW), Ok(()));
        assert_eq!(seen.check(NOW - 1_000, "a", "n1", NOW), Err(Stale::Seen));
        assert_eq!(
            seen.check(NOW - 1_000, "b", "n1", NOW),
            Ok(()),
            "another sender"
        );
        assert_eq!(
            seen.check(NOW - FRESH_WITHIN_MS - 1, "a", "n2", NOW),
            Err(Stale::Outside),
            "too old"
        );
        assert_eq!(
            seen.check(NOW + FRESH_WITHIN_MS + 1, "a", "n3", NOW),
            Err(Stale::Outside),
            "from the future"
        );
        // Later, the old ones are forgotten (and would be too old anyway).
        let later = NOW + FRESH_WITHIN_MS + 2_000;
        assert_eq!(seen.check(later, "a", "n4", later), Ok(()));
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen.check(NOW - 1_000, "a", "n1", later),
            Err(Stale::Outside)
        );
    }

    #[test]
    fn the_set_stays_bounded_and_forgotten_calls_are_not_taken_again() {
        let mut seen = Seen::since(NOW - 60_000);
        for n in 0..SEEN_MOST + 10 {
            let at = NOW - 10_000 + n as u64;
            assert_eq!(seen.check(at, "a", &format!("n{n}"), NOW), Ok(()));
        }
        assert_eq!(seen.len(), SEEN_MOST);
        // The first one was forgotten for room: a copy of it is still dropped, and said so.
        assert_eq!(
            seen.check(NOW - 10_000, "a", "n0", NOW),
            Err(Stale::Crowded)
        );
        let last = SEEN_MOST + 9;
        let at = NOW - 10_000 + last as u64;
        assert_eq!(
            seen.check(at, "a", &format!("n{last}"), NOW),
            Err(Stale::Seen)
        );
    }

    #[test]
    fn nothing_sent_before_the_start_is_taken() {
        let mut seen = Seen::since(NOW);
        assert_eq!(seen.check(NOW - 1_000, "a", "n1", NOW), Err(Stale::Outside));
        assert_eq!(seen.check(NOW - 1, "a", "n2", NOW), Err(Stale::Outside));
        assert_eq!(seen.check(NOW, "a", "n3", NOW), Ok(()));
    }

    #[test]
    fn a_clock_stepping_back_does_not_take_a_forgotten_call_again() {
        let mut seen = Seen::since(NOW - 60_000);
        assert_eq!(seen.check(NOW - 1_000, "a", "n1", NOW), Ok(()));
        // Later, a call makes the first one fall out of the window: forgotten.
        let later = NOW + FRESH_WITHIN_MS + 10_000;
        assert_eq!(seen.check(later, "a", "n2", later), Ok(()));
        assert_eq!(seen.len(), 1);
        // The clock steps back: the copy is within the window again, yet dropped.
        assert_eq!(seen.check(NOW - 1_000, "a", "n1", NOW), Err(Stale::Outside));
    }
}
