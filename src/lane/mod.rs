//! Lanes: one FIFO task per session key, a global limit on concurrent runs, and the four
//! queue modes (SPEC 3).
//!
//! A lane owns its session while it lives: turns, `/stop` and `/queue` all reach it through
//! its bounded mailbox, and it alone starts runs for that key. The run itself is done by a
//! [`Runner`] (the gateway's agent + reply path, or a fake in tests).

pub mod queue;
mod task;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::agent::provider::BoxFuture;
use crate::agent::run::{RunOutcome, Steer};
use crate::config::{DropPolicy, QueueMode};
use crate::store::Store;
pub use queue::QueuedTurn;

/// Mailbox size of one lane: a full mailbox is back-pressure on the caller.
const MAILBOX: usize = 64;
/// How often [`Lanes::drain`] looks whether the runs have finished.
const DRAIN_POLL: Duration = Duration::from_millis(20);
/// Map size past which ended lanes are swept out before a new one is added.
const LANE_MAP_SWEEP: usize = 256;

/// Queue behaviour of one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaneSettings {
    /// How messages arriving during a run are handled.
    pub mode: QueueMode,
    /// Collect-mode quiet window.
    pub debounce: Duration,
    /// Most pending turns.
    pub cap: usize,
    /// What happens past the cap.
    pub drop: DropPolicy,
}

/// Does the actual work of a turn (agent run and reply delivery).
pub trait Runner: Send + Sync {
    /// Runs `turn` for `key`. Must remove the turn's durable pending seqs (and the steered
    /// ones it consumed) no later than it records the final reply.
    fn run(
        &self,
        key: String,
        turn: QueuedTurn,
        cancel: CancellationToken,
        steer: mpsc::Receiver<Box<Steer>>,
    ) -> BoxFuture<'static, RunOutcome>;
    /// Tells a conversation something short (a dropped message, a queue notice) without a run.
    fn notice(&self, to: &chela_channel::Conversation, text: String);
    /// Says that the turns of durable pending `seqs` of session `key` will never run (`/stop`
    /// cleared them, the queue cap dropped them); their pending entries are already gone.
    /// Whoever waits for their run learns it from this, not from a timeout.
    fn dropped(&self, key: &str, seqs: &[u64]);
    /// What to show while `turn` waits for a slot under the global run limit (the typing
    /// indicator); it never ends by itself and is dropped when the run starts or is stopped.
    fn waiting(&self, turn: &QueuedTurn) -> BoxFuture<'static, std::convert::Infallible>;
    /// Whether `turn` of session `key` may start here now. On a cluster a message of the
    /// session may wait outside its lane: a partition lost for a moment and taken back hands
    /// its waiting turns out again while the lane still holds turns handed out before, and a
    /// run cut by the loss left its message waiting. Always [`Hold::Go`] when one process runs
    /// every session.
    fn hold(&self, _key: &str, _turn: &QueuedTurn) -> Hold {
        Hold::Go
    }
    /// Gives the messages of `seqs` of session `key` back, to be handed out again in seq
    /// order: a lane did not start a turn ([`Runner::hold`]). Never called when one process
    /// runs every session.
    fn give_back(&self, _key: &str, _seqs: &[u64]) {}
}

/// Whether a lane may start a turn now ([`Runner::hold`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Start it.
    Go,
    /// The session does not run here now (its partition is not held, or its recovery has
    /// not run yet): give the turn and every queued one back.
    NotHere,
    /// These durable pending messages of the session are older than the turn: unless each
    /// is queued in this lane, give them, the turn and every queued one back.
    Older(Vec<u64>),
}

/// What `/stop` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StopReport {
    /// Queued turns dropped.
    pub cleared: usize,
    /// Whether an active run was cancelled (and has settled).
    pub stopped_run: bool,
}

/// A snapshot of a lane for `/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneStatus {
    /// Current settings.
    pub settings: LaneSettings,
    /// Queued turns.
    pub queued: usize,
    /// Whether a run is active.
    pub running: bool,
}

/// Messages a lane task accepts. Kept small (a turn and settings are boxed): a mailbox
/// allocates its slots in blocks of 32, and every live lane has one.
pub(crate) enum LaneMsg {
    Turn(Box<QueuedTurn>),
    Write(TranscriptWrite),
    Job(LaneJob),
    Stop(oneshot::Sender<StopReport>),
    Status(oneshot::Sender<LaneStatus>),
    Settings(Box<LaneSettings>),
    WaitIdle(oneshot::Sender<()>),
}

/// A write to a session's transcript from outside its runs (a command's entry, such as
/// `/model`'s `model_change` or `/new`'s `reset`). The lane runs it when no run of its
/// session is active and before the next one starts, so the lane stays the only writer of
/// its transcript and a command's entry never lands between a run's.
pub type TranscriptWrite = Box<dyn FnOnce() + Send>;

/// Work that holds a session's lane the way a run does (`/compact`'s summary): it starts
/// when no run is active, before the next queued turn, under the global run limit, and
/// `/stop` cancels it through the token it gets. While it works, the lane is the only
/// writer of its transcript as during a run.
pub type LaneJob = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// Why a lane could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum LaneError {
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    Closed,
    /// `/stop` (or a shutdown) dropped the work before it ran to its end.
    #[error("stopped before it finished")]
    Stopped,
}

/// Shared by every lane.
pub(crate) struct Shared {
    pub(crate) runner: Arc<dyn Runner>,
    pub(crate) limit: Arc<Semaphore>,
    /// The global run limit (all of `limit`'s permits).
    pub(crate) max_runs: usize,
    pub(crate) store: Store,
    pub(crate) shutdown: CancellationToken,
    /// Set when the gateway is stopping: runs going on may finish, no new one starts.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// Lane mailboxes by session key. Senders put messages in with `try_send` under this
    /// lock, and a lane only ends (idle) under it with an empty mailbox: no message is lost.
    pub(crate) lanes: Mutex<HashMap<String, mpsc::Sender<LaneMsg>>>,
    /// The sessions whose lane has a run (or a job) going on, kept by the lanes themselves:
    /// asking each lane would wake it and keep it from retiring.
    pub(crate) running: Mutex<std::collections::HashSet<String>>,
}

/// The settings stored for `key` (its `/queue` override), else `defaults`; an unreadable
/// override is logged and the defaults used.
pub(crate) fn stored_settings(store: &Store, key: &str, defaults: LaneSettings) -> LaneSettings {
    match store.get_settings::<LaneSettings>(key) {
        Ok(settings) => settings.unwrap_or(defaults),
        Err(e) => {
            tracing::warn!(error = %e, session = key, "cannot read queue settings; using the defaults");
            defaults
        }
    }
}

/// The set of lanes, keyed by session key.
#[derive(Clone)]
pub struct Lanes {
    shared: Arc<Shared>,
    defaults: LaneSettings,
    tasks: tokio_util::task::TaskTracker,
}

impl Lanes {
    /// Creates the lane set; `max_runs` bounds concurrent runs across all sessions.
    pub fn new(
        runner: Arc<dyn Runner>,
        store: Store,
        defaults: LaneSettings,
        max_runs: usize,
    ) -> Self {
        Lanes {
            shared: Arc::new(Shared {
                runner,
                limit: Arc::new(Semaphore::new(max_runs.max(1))),
                max_runs: max_runs.max(1),
                store,
                shutdown: CancellationToken::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                lanes: Mutex::new(HashMap::new()),
                running: Mutex::new(std::collections::HashSet::new()),
            }),
            defaults,
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// The settings a session uses: its `/queue` override, else the defaults.
    pub fn settings_for(&self, key: &str) -> LaneSettings {
        stored_settings(&self.shared.store, key, self.defaults)
    }

    /// The global defaults.
    pub fn defaults(&self) -> LaneSettings {
        self.defaults
    }

    /// Hands a turn to its lane (starting the lane if needed).
    pub async fn submit(&self, key: &str, turn: QueuedTurn) -> Result<(), LaneError> {
        self.send(key, LaneMsg::Turn(Box::new(turn))).await
    }

    /// `/stop`: clears queued turns, cancels the active run and waits until it settled.
    pub async fn stop(&self, key: &str) -> Result<StopReport, LaneError> {
        let (tx, rx) = oneshot::channel();
        self.send(key, LaneMsg::Stop(tx)).await?;
        rx.await.map_err(|_| LaneError::Closed)
    }

    /// A status snapshot.
    pub async fn status(&self, key: &str) -> Result<LaneStatus, LaneError> {
        let (tx, rx) = oneshot::channel();
        self.send(key, LaneMsg::Status(tx)).await?;
        rx.await.map_err(|_| LaneError::Closed)
    }

    /// Hands `write` to `key`'s lane, which runs it when no run is active (see
    /// [`TranscriptWrite`]); resolves with its result once it ran.
    pub async fn write_transcript<T, F>(&self, key: &str, write: F) -> Result<T, LaneError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let written = self.queue_transcript_write(key, write).await?;
        written.await.map_err(|_| LaneError::Closed)
    }

    /// As [`Lanes::write_transcript`], but resolves once the lane has the write (in order
    /// with what the lane got before), without waiting for a run going on to end; the
    /// receiver gets the result later.
    pub async fn queue_transcript_write<T, F>(
        &self,
        key: &str,
        write: F,
    ) -> Result<oneshot::Receiver<T>, LaneError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: TranscriptWrite = Box::new(move || {
            let _ = tx.send(write());
        });
        self.send(key, LaneMsg::Write(job)).await?;
        Ok(rx)
    }

    /// Hands `job` to `key`'s lane (see [`LaneJob`]) and resolves with its result once it
    /// ran; [`LaneError::Stopped`] when `/stop` or a shutdown dropped it first.
    pub async fn run_job<T, F>(&self, key: &str, job: F) -> Result<T, LaneError>
    where
        T: Send + 'static,
        F: FnOnce(CancellationToken) -> BoxFuture<'static, T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: LaneJob = Box::new(move |cancel| {
            let work = job(cancel);
            Box::pin(async move {
                let _ = tx.send(work.await);
            })
        });
        self.send(key, LaneMsg::Job(job)).await?;
        rx.await.map_err(|_| LaneError::Stopped)
    }

    /// The sessions whose lane has a run going on, sorted ([`Lanes::running_now`]).
    pub async fn running_sessions(&self) -> Vec<String> {
        self.running_now()
    }

    /// The sessions whose lane has a run going on, sorted (no lane is asked, so none is
    /// woken or kept alive by the question).
    pub fn running_now(&self) -> Vec<String> {
        let mut running: Vec<String> = match self.shared.running.lock() {
            Ok(set) => set.iter().cloned().collect(),
            Err(_) => Vec::new(),
        };
        running.sort();
        running
    }

    /// `/queue`: sets (and persists) a session's settings; `None` goes back to the defaults.
    pub async fn set_settings(
        &self,
        key: &str,
        settings: Option<LaneSettings>,
    ) -> Result<LaneSettings, LaneError> {
        let effective = match settings {
            Some(s) => {
                if let Err(e) = self.shared.store.put_settings(key, &s) {
                    tracing::warn!(error = %e, session = key, "cannot save queue settings");
                }
                s
            }
            None => {
                if let Err(e) = self.shared.store.clear_settings(key) {
                    tracing::warn!(error = %e, session = key, "cannot clear queue settings");
                }
                self.defaults
            }
        };
        self.send(key, LaneMsg::Settings(Box::new(effective)))
            .await?;
        Ok(effective)
    }

    /// Resolves once the lane has nothing queued and no run active.
    pub async fn wait_idle(&self, key: &str) -> Result<(), LaneError> {
        let (tx, rx) = oneshot::channel();
        self.send(key, LaneMsg::WaitIdle(tx)).await?;
        rx.await.map_err(|_| LaneError::Closed)
    }

    /// Lets the runs going on finish, for at most `grace`, while no new run starts (queued
    /// turns stay pending for the next start). Answers how many runs were still going when
    /// the grace ran out.
    pub async fn drain(&self, grace: Duration) -> usize {
        self.shared.draining.store(true, Ordering::SeqCst);
        let deadline = crate::domain::deadline::after(grace);
        loop {
            let running = self.running();
            if running == 0 || tokio::time::Instant::now() >= deadline {
                return running;
            }
            tokio::time::sleep(DRAIN_POLL.min(grace)).await;
        }
    }

    /// How many runs hold a slot under the global limit.
    fn running(&self) -> usize {
        self.shared
            .max_runs
            .saturating_sub(self.shared.limit.available_permits())
    }

    /// Stops every lane: active runs are cancelled, queued turns stay durable for the next
    /// start. Resolves when every lane task has ended.
    pub async fn shutdown(&self) {
        self.shared.shutdown.cancel();
        if let Ok(mut lanes) = self.shared.lanes.lock() {
            lanes.clear();
        }
        self.tasks.close();
        self.tasks.wait().await;
    }

    async fn send(&self, key: &str, mut msg: LaneMsg) -> Result<(), LaneError> {
        loop {
            if self.shared.shutdown.is_cancelled() {
                return Err(LaneError::Closed);
            }
            let busy = {
                let mut lanes = self.shared.lanes.lock().map_err(|_| LaneError::Closed)?;
                let sender = match lanes.get(key).filter(|tx| !tx.is_closed()) {
                    Some(tx) => tx.clone(),
                    None => self.start_lane(key, &mut lanes),
                };
                match sender.try_send(msg) {
                    Ok(()) => return Ok(()),
                    Err(mpsc::error::TrySendError::Full(back)) => {
                        msg = back;
                        sender
                    }
                    Err(mpsc::error::TrySendError::Closed(back)) => {
                        msg = back;
                        continue;
                    }
                }
            };
            // A full mailbox is back-pressure: a busy lane does not end, so waiting is safe.
            match busy.send(msg).await {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(back)) => msg = back,
            }
        }
    }

    /// Starts `key`'s lane and registers its mailbox.
    fn start_lane(
        &self,
        key: &str,
        lanes: &mut HashMap<String, mpsc::Sender<LaneMsg>>,
    ) -> mpsc::Sender<LaneMsg> {
        if lanes.len() >= LANE_MAP_SWEEP {
            // Amortized sweep of entries whose lane ended.
            lanes.retain(|_, tx| !tx.is_closed());
        }
        let (tx, rx) = mpsc::channel(MAILBOX);
        // The lane reads its settings itself, outside this lock: on PostgreSQL that read is
        // a round trip, and every other session's messages wait for this lock.
        self.tasks.spawn(task::lane(
            key.to_string(),
            self.defaults,
            rx,
            self.shared.clone(),
        ));
        lanes.insert(key.to_string(), tx.clone());
        tx
    }
}
