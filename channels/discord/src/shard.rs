//! One shard of the bot's gateway connection and what it remembers on its own. Discord sends
//! a guild's events to shard `(guild_id >> 22) % num_shards` and direct messages to shard 0
//! only, so each shard has its own READY, catch-up on history, collector and connection
//! state; what the shards share (the bot's id, cursors, where channels sit) is
//! the channel's `State` (in `state`, which keeps the shards running here).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// How long a message waits at most for what it needs before it can be taken: the bot's id
/// (READY, or `GET /users/@me` at start) and the end of its shard's catch-up on history.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// The shard of `guild` among `total` shards: `(guild_id >> 22) % total`; shard 0 for direct
/// messages (`None`).
pub fn shard_of(guild: Option<u64>, total: u32) -> u32 {
    match guild {
        Some(guild) => u32::try_from((guild >> 22) % u64::from(total.max(1))).unwrap_or(0),
        None => 0,
    }
}

/// The state of one running shard.
pub struct Shard {
    id: u32,
    total: u32,
    /// Catch-ups on channel history under way: live messages wait for them, so a
    /// conversation's older messages are taken first.
    catching_up: watch::Sender<usize>,
    /// Set until the first READY took over the hold on live messages made at start.
    initial_hold: AtomicBool,
    /// Id of the first message the current collector saw: later ones are its to hand on.
    first_collected: Mutex<Option<u64>>,
    /// Whether its gateway connection is up (READY or RESUMED, and no stage change since
    /// that left the connected stage).
    connected: AtomicBool,
}

impl Shard {
    /// Shard `id` of `total` (at least 1).
    pub fn new(id: u32, total: u32) -> Shard {
        Shard {
            id,
            total: total.max(1),
            catching_up: watch::channel(0).0,
            initial_hold: AtomicBool::new(false),
            first_collected: Mutex::new(None),
            connected: AtomicBool::new(false),
        }
    }

    /// Its id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// How many shards the bot runs.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Whether this shard receives the events of `guild` (`None`: direct messages).
    pub fn owns(&self, guild: Option<u64>) -> bool {
        shard_of(guild, self.total) == self.id
    }

    /// Records whether the gateway connection is up.
    pub fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
    }

    /// Whether the gateway connection is up.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Holds live messages until the first READY's catch-up is done (called at start, before
    /// the gateway connects).
    pub fn hold_until_ready(&self) {
        if !self.initial_hold.swap(true, Ordering::SeqCst) {
            self.catching_up.send_modify(|n| *n += 1);
        }
    }

    /// A catch-up on history begins: live messages wait until [`Shard::end_catch_up`]. The
    /// first one takes over the hold made at start.
    pub fn begin_catch_up(&self) {
        if !self.initial_hold.swap(false, Ordering::SeqCst) {
            self.catching_up.send_modify(|n| *n += 1);
        }
    }

    /// A catch-up on history ended.
    pub fn end_catch_up(&self) {
        self.catching_up.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Waits (at most [`READY_WAIT`]) until no catch-up runs; false when it timed out.
    pub async fn caught_up(&self) -> bool {
        let mut rx = self.catching_up.subscribe();
        let done = tokio::time::timeout(READY_WAIT, rx.wait_for(|n| *n == 0)).await;
        matches!(done, Ok(Ok(_)))
    }

    /// A new collector is about to be registered: until it sees a message, the handler
    /// hands messages on itself.
    pub fn reset_collected(&self) {
        if let Ok(mut first) = self.first_collected.lock() {
            *first = None;
        }
    }

    /// Called by the collector (in gateway order) for every message it sees.
    pub fn note_collected(&self, id: u64) {
        if let Ok(mut first) = self.first_collected.lock() {
            first.get_or_insert(id);
        }
    }

    /// Whether the collector took (or will take) message `id`. Snowflakes grow with time, and
    /// the collector sees a message before its handler call is spawned.
    pub fn collected(&self, id: u64) -> bool {
        self.first_collected
            .lock()
            .ok()
            .and_then(|f| *f)
            .is_some_and(|first| id >= first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guilds_go_to_the_shard_of_their_id_and_dms_to_shard_zero() {
        // Discord's formula, on a real guild id: (41771983423143937 >> 22) % 4 = 2.
        assert_eq!(shard_of(Some(41_771_983_423_143_937), 4), 2);
        assert_eq!(shard_of(Some(5 << 22), 2), 1);
        assert_eq!(shard_of(Some(4 << 22), 2), 0);
        assert_eq!(shard_of(Some(5 << 22), 1), 0, "one shard takes everything");
        assert_eq!(shard_of(None, 4), 0);
        let one = Shard::new(1, 2);
        assert!(one.owns(Some(5 << 22)));
        assert!(!one.owns(Some(4 << 22)));
        assert!(!one.owns(None), "DMs are shard 0's");
        assert!(Shard::new(0, 2).owns(None));
        assert!(Shard::new(0, 0).owns(Some(5 << 22)), "0 shards count as 1");
    }
}
