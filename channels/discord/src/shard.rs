//! One shard of the bot's gateway connection and what it remembers on its own. Discord sends
//! a guild's events to shard `(guild_id >> 22) % num_shards` and direct messages to shard 0
//! only, so each shard has its own READY, catch-up on history, collector and connection
//! state; what the shards share (the bot's id, cursors, where channels sit) is
//! the channel's `State` (in `state`, which keeps the shards running here).
//!
//! The tasks a shard starts (its cursor saver, its connection watch, its catch-ups, its
//! collectors) are its own ([`Shard::spawn`], [`Shard::track`]): when the shard stops (its
//! lease lost or given back on a cluster, or the channel stopped), [`Shard::stop`] cancels
//! them and waits until they ended, so none outlives the shard.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a message waits at most for what it needs before it can be taken: the bot's id
/// (READY, or `GET /users/@me` at start) and the end of its shard's catch-up on history.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// How long stopping a shard waits at most for its tasks to end.
pub const STOP_WAIT: Duration = Duration::from_secs(5);

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
    /// Fires when the shard stops: its tasks end.
    stop: CancellationToken,
    /// Its tasks.
    tasks: TaskTracker,
}

impl Shard {
    /// Shard `id` of `total` (at least 1).
    pub fn new(id: u32, total: u32) -> Shard {
        Shard::under(id, total, &CancellationToken::new())
    }

    /// Shard `id` of `total`, stopped too when `parent` fires.
    pub fn under(id: u32, total: u32, parent: &CancellationToken) -> Shard {
        Shard {
            id,
            total: total.max(1),
            catching_up: watch::channel(0).0,
            initial_hold: AtomicBool::new(false),
            first_collected: Mutex::new(None),
            connected: AtomicBool::new(false),
            stop: parent.child_token(),
            tasks: TaskTracker::new(),
        }
    }

    /// The token that fires when the shard stops.
    pub fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Runs `task` as one of the shard's: dropped (at its next await) when the shard stops.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Runs `task` as one of the shard's, which ends by itself once [`Shard::stopping`]
    /// fires (a cursor saver that saves once more first).
    pub fn track<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(task);
    }

    /// Stops the shard: its tasks are cancelled, and this waits until every one ended, at
    /// most [`STOP_WAIT`] (the cursor saver's last save may hang on a store that does not
    /// answer; the part must still end so that it can be run again).
    pub async fn stop(&self) {
        self.stop.cancel();
        self.tasks.close();
        if tokio::time::timeout(STOP_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                shard = self.id,
                "discord: a stopped shard's tasks did not end in time; going on without them"
            );
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
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Notes when it is dropped (its task ended, however).
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_shards_tasks_end_before_stop_returns() {
        let channel = CancellationToken::new();
        let shard = Arc::new(Shard::under(1, 2, &channel));
        let (stuck, saved) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        // A collector or catch-up waiting forever (for a message, a slow REST call).
        let guard = Dropped(stuck.clone());
        shard.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        // A saver: ends by itself on the shard's token, saving once more.
        let (stop, done) = (shard.stopping(), saved.clone());
        shard.track(async move {
            stop.cancelled().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
            done.store(true, Ordering::SeqCst);
        });
        // A catch-up under way: stopping ends it, so nothing waits on it.
        shard.begin_catch_up();
        let end = crate::catch_up::EndCatchUp(shard.clone());
        shard.spawn(async move {
            let _end = end;
            std::future::pending::<()>().await;
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!stuck.load(Ordering::SeqCst) && !saved.load(Ordering::SeqCst));
        assert!(!channel.is_cancelled());
        shard.stop().await;
        assert!(stuck.load(Ordering::SeqCst), "the stuck task was dropped");
        assert!(saved.load(Ordering::SeqCst), "the saver ended by itself");
        assert!(shard.caught_up().await, "the catch-up ended with its task");
        assert!(!channel.is_cancelled(), "the other shards go on");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_stops_with_its_channel() {
        let channel = CancellationToken::new();
        let shard = Shard::under(0, 2, &channel);
        assert!(!shard.stopping().is_cancelled());
        channel.cancel();
        assert!(shard.stopping().is_cancelled());
    }

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
