//! The last message taken per Discord channel (guild channel, thread or DM), kept durably as
//! the cursor `discord:<account>:last:<channel id>`, so that after a restart or a reconnect
//! the catch-up knows which channels to read and from where.
//!
//! A cursor only moves past a message the sink accepted (durable, or deliberately dropped by
//! admission). A channel's first cursor is written at once; later moves are written in the
//! background every [`SAVE_EVERY`]: one lagging
//! behind after a crash only makes the catch-up read a message again, and dedupe drops it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use chela_channel::InboundSink;

use crate::record::{Record, Stored};

/// How often moved cursors are written.
pub const SAVE_EVERY: Duration = Duration::from_millis(500);
/// How long a failed message holds its channel's cursor: the catch-up's reach (its window,
/// `catch_up::WINDOW`, which uses this module).
pub const HOLD_MAX: Duration = Duration::from_secs(15 * 60);
/// Channels remembered at most (past that, the saved cursor of the oldest last message goes
/// first; an unsaved one only when none is saved).
const MAX_CHANNELS: usize = 10_000;

/// A message id, kept as is; a cursor only moves forward, so a late write of a stopped
/// shard's older one leaves the newer one its new holder wrote.
impl Stored for u64 {
    const FORWARD_ONLY: bool = true;

    fn to_cursor(self) -> Option<i64> {
        i64::try_from(self).ok()
    }
    fn from_cursor(cursor: i64) -> Option<u64> {
        u64::try_from(cursor).ok()
    }
}

/// Last message id per channel id, and whether it moved since the last save.
pub struct Seen {
    last: Record<u64>,
    /// Per channel, the oldest message the sink failed to take: the cursor stays below it
    /// until it is taken (a later catch-up reads it again), so a store error on one message
    /// followed by an accepted one does not skip the first. Kept in memory only: after a
    /// restart the saved cursor is below it anyway. A hold ends after [`HOLD_MAX`] (the
    /// catch-up reads no further back), so a message that never comes again cannot pin the
    /// cursor.
    held: Mutex<HashMap<u64, (u64, Instant)>>,
}

impl Seen {
    /// Cursors of `account`.
    pub fn new(account: &str) -> Seen {
        Seen {
            last: Record::new(
                format!("discord:{account}:last:"),
                "a channel cursor",
                MAX_CHANNELS,
                |last| *last,
            ),
            held: Mutex::new(HashMap::new()),
        }
    }

    /// Notes that the sink failed to take message `id` of `channel`: the cursor does not
    /// move past it until it is taken.
    pub fn hold(&self, channel: u64, id: u64) {
        if let Ok(mut held) = self.held.lock() {
            let oldest = held.entry(channel).or_insert((id, Instant::now()));
            if id < oldest.0 {
                oldest.0 = id;
            }
        }
    }

    /// How far a take of message `id` may move `channel`'s cursor: to `id`, or to just
    /// below a failed message (taking the failed one itself lifts the hold).
    fn allowed(&self, channel: u64, id: u64) -> u64 {
        let Ok(mut held) = self.held.lock() else {
            return id;
        };
        match held.get(&channel).copied() {
            Some((failed, since)) if failed == id || since.elapsed() > HOLD_MAX => {
                held.remove(&channel);
                id
            }
            Some((failed, _)) if failed < id => failed.saturating_sub(1),
            _ => id,
        }
    }

    /// Notes that message `id` of `channel` was taken; true when `channel` is new here (the
    /// caller then saves at once, so the channel is known to the next start's catch-up).
    pub fn note(&self, channel: u64, id: u64) -> bool {
        let id = self.allowed(channel, id);
        self.last.note(channel, id, |here| id > *here)
    }

    /// The last message taken in `channel`, if known.
    pub fn last(&self, channel: u64) -> Option<u64> {
        self.last.get(channel)
    }

    /// Reads the saved cursors into memory (a newer one noted meanwhile wins); every known
    /// channel with its last message, newest first.
    pub async fn load(&self, sink: &dyn InboundSink) -> Vec<(u64, u64)> {
        self.last.load(sink, |here, saved| saved > here).await;
        let mut all = self.last.all();
        all.sort_by_key(|b| std::cmp::Reverse(b.1));
        all
    }

    /// Writes the cursors that moved since they were last written.
    pub async fn save(&self, sink: &dyn InboundSink) {
        self.last.save(sink).await;
    }

    /// Writes `channel`'s cursor now if it is not written yet, beside a save under way.
    pub async fn save_one(&self, sink: &dyn InboundSink, channel: u64) {
        self.last.save_one(sink, channel).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::record::test_sink::{Broken, Cursors};

    #[tokio::test]
    async fn cursors_only_move_forward_and_survive_a_new_seen() {
        let sink = Cursors::default();
        let seen = Seen::new("default");
        assert!(seen.note(10, 500));
        assert!(!seen.note(10, 400));
        seen.note(11, 7);
        seen.save(&sink).await;
        assert_eq!(
            sink.0.lock().unwrap().get("discord:default:last:10"),
            Some(&500)
        );
        let again = Seen::new("default");
        again.note(11, 9);
        let all = again.load(&sink).await;
        assert_eq!(all, vec![(10, 500), (11, 9)]);
        assert_eq!(Seen::new("other").load(&sink).await, vec![]);
    }

    #[tokio::test]
    async fn a_stopped_shards_late_write_does_not_move_a_cursor_back() {
        // Raised cursors keep the larger value, as the stores' do.
        let sink = Cursors::default();
        // The shard stopped before it wrote 500; its new holder (another node) took 600.
        let stopped = Seen::new("default");
        stopped.note(10, 500);
        let holder = Seen::new("default");
        holder.note(10, 600);
        holder.save(&sink).await;
        stopped.save(&sink).await;
        assert_eq!(
            sink.0.lock().unwrap().get("discord:default:last:10"),
            Some(&600)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_save_dropped_midway_leaves_what_it_did_not_write_to_the_next_one() {
        let seen = Seen::new("default");
        assert!(seen.note(10, 500), "a new channel");
        let cut = tokio::time::timeout(Duration::from_secs(1), seen.save(&Broken::Hangs)).await;
        assert!(cut.is_err(), "the save hung and was dropped");
        let sink = Cursors::default();
        seen.save(&sink).await;
        assert_eq!(
            sink.0.lock().unwrap().get("discord:default:last:10"),
            Some(&500),
            "the channel's first cursor is written by the next save"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_ends_when_the_catch_up_could_no_longer_read_the_message() {
        let seen = Seen::new("default");
        seen.note(10, 100);
        seen.hold(10, 105);
        seen.note(10, 110);
        assert_eq!(seen.last(10), Some(104));
        tokio::time::advance(HOLD_MAX + Duration::from_secs(1)).await;
        seen.note(10, 120);
        assert_eq!(seen.last(10), Some(120), "the hold expired");
    }

    #[test]
    fn a_failed_message_holds_the_cursor_below_it_until_it_is_taken() {
        let seen = Seen::new("default");
        seen.note(10, 100);
        seen.hold(10, 105);
        seen.note(10, 110);
        assert_eq!(seen.last(10), Some(104), "not past the failed message");
        seen.note(10, 105);
        assert_eq!(seen.last(10), Some(105), "taken: the hold is lifted");
        seen.note(10, 110);
        assert_eq!(seen.last(10), Some(110));
    }
}
