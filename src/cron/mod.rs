//! Scheduled turns: one scheduler task per gateway fires the store's jobs (`CronStore`) as
//! turns of their sessions through the pending queue, so their answers take the normal reply
//! path (journal, outbox). `jobs.rs` adds, lists, removes and runs jobs (for the `cron` tool,
//! the RPC and `[[cron]]`); `heartbeat.rs` the periodic `[heartbeat]` turn. The stage takes
//! the store, a wake-up and the [`Fire`] port (intake's durable queue) at construction; the
//! tool's side is `reach/cron.rs` and the operator's (`chela cron`, the RPC's `cron.*`)
//! `rpc/cron_operator.rs`.
//!
//! **Exactly once.** A run scheduled at `due` is queued with the dedupe key
//! `cron|<id>|<due>` ([`QueueStore::enqueue_unique`](crate::store::QueueStore)) *before* the job
//! moves on ([`CronStore::advance_cron`], a compare-and-set from `due`). A crash between the
//! two queues the same key again at the next start and the dedupe mark drops it; several
//! nodes of a cluster race on the same key and the same compare-and-set, and one wins each.

mod fire;
mod heartbeat;
pub mod jobs;

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{BoxFuture, Conversation, Inbound, Sender};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::domain::schedule::{Missed, ScheduleError};
use crate::store::{CronJob, CronOrigin, PendingTurn, Store, StoreError};

pub use fire::IntakeFire;
pub use heartbeat::{HEARTBEAT_ID, HEARTBEAT_OK, HEARTBEAT_SENDER, is_heartbeat_ok};

/// A run found this long after its time was missed (the gateway was down): it runs once or
/// is skipped, per job.
pub const MISSED_AFTER_MS: u64 = 60_000;
/// The longest sleep while jobs exist: the wall clock is read again at least this often
/// (a suspended host, a clock step).
const MAX_SLEEP: Duration = Duration::from_secs(60);
/// How long the scheduler waits after a store error before it tries again.
const RETRY: Duration = Duration::from_secs(5);
/// The display name of a scheduled turn's sender.
pub const CRON_SENDER: &str = "cron";

/// Why a job could not be made, changed or run.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The schedule is not valid.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The request is not valid or not allowed; the text says why.
    #[error("{0}")]
    Refused(String),
    /// No job has this id.
    #[error("no job `{0}`")]
    NotFound(String),
    /// The turn could not be queued.
    #[error("cannot queue the job's turn: {0}")]
    Queue(String),
}

/// Where the time comes from (ms since the epoch): the system clock, or a test's.
pub trait Clock: Send + Sync {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::domain::message::now_ms()
    }
}

/// Where fired runs go: queued once per dedupe key, then handed to the session's lane.
pub trait Fire: Send + Sync {
    /// Queues `turn` unless `dedupe` was queued before; its seq, or `None` for a duplicate.
    fn fire<'a>(
        &'a self,
        dedupe: &'a str,
        turn: PendingTurn,
    ) -> BoxFuture<'a, Result<Option<u64>, CronError>>;
}

/// The dedupe key of job `id`'s run scheduled at `due_ms`.
pub fn run_key(id: &str, due_ms: u64) -> String {
    format!("cron|{id}|{due_ms}")
}

/// The turn job `job` runs (scheduled at `due_ms`), into conversation `to`.
pub fn turn_of(job: &CronJob, to: Conversation, due_ms: u64, now_ms: u64) -> PendingTurn {
    let heartbeat = job.origin == CronOrigin::Heartbeat;
    let text = if heartbeat {
        job.message.clone()
    } else {
        format!("[Scheduled job {}] {}", job.id, job.message)
    };
    PendingTurn {
        session_key: job.run_session(),
        inbound: Inbound {
            conversation: to,
            sender: Sender {
                id: crate::inbound::route::SYSTEM_SENDER.to_owned(),
                name: if heartbeat {
                    HEARTBEAT_SENDER
                } else {
                    CRON_SENDER
                }
                .to_owned(),
                username: None,
            },
            message_id: format!(
                "{}{}:{due_ms}",
                crate::inbound::route::SCHEDULED_ID_PREFIX,
                job.id
            ),
            text,
            reply_to: None,
            mentioned: true,
            timestamp_ms: now_ms,
            interaction: None,
            attachments: Vec::new(),
        },
        queued_ms: now_ms,
    }
}

/// The one scheduler of a gateway.
pub struct Scheduler {
    store: Store,
    clock: Arc<dyn Clock>,
    fire: Arc<dyn Fire>,
    wake: Arc<Notify>,
    /// The longest sleep while jobs exist.
    max_sleep: Duration,
    /// Also look every `max_sleep` when no job exists: other nodes sharing the store add
    /// jobs whose change never wakes this one.
    shared: bool,
    /// When the scheduler sleeps until (ms), `None` while it waits for a change only;
    /// published after every pass (tests step the clock by it).
    sleeping: watch::Sender<Option<u64>>,
}

impl Scheduler {
    /// A scheduler over `store`, woken early by `wake` when jobs change.
    pub fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        fire: Arc<dyn Fire>,
        wake: Arc<Notify>,
    ) -> Scheduler {
        Scheduler {
            store,
            clock,
            fire,
            wake,
            max_sleep: MAX_SLEEP,
            shared: false,
            sleeping: watch::channel(None).0,
        }
    }

    /// The same, for a store shared with other nodes (`[cluster] enabled`): without jobs it
    /// still looks every `max_sleep`.
    pub fn shared(mut self) -> Scheduler {
        self.shared = true;
        self
    }

    /// The same, reading the clock again at least every `max_sleep` (default a minute).
    pub fn with_max_sleep(mut self, max_sleep: Duration) -> Scheduler {
        self.max_sleep = max_sleep;
        self
    }

    /// What the scheduler sleeps until after each pass.
    pub fn watch(&self) -> watch::Receiver<Option<u64>> {
        self.sleeping.subscribe()
    }

    /// Fires what is due, sleeps until the earliest next run (or a change), until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        loop {
            let now = self.clock.now_ms();
            let wait = match self.pass(now).await {
                Ok(Some(next)) => {
                    Some(Duration::from_millis(next.saturating_sub(now)).min(self.max_sleep))
                }
                Ok(None) => self.shared.then_some(self.max_sleep),
                Err(e) => {
                    tracing::warn!(error = %e, "cron: cannot fire the jobs due; trying again");
                    Some(RETRY)
                }
            };
            let until = wait.map(|w| now.saturating_add(u64::try_from(w.as_millis()).unwrap_or(0)));
            self.sleeping.send_replace(until);
            let sleep = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    // No job: no timer at all, only a change wakes it.
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = sleep => {}
            }
        }
    }

    /// Fires every job due at `now_ms`; returns the earliest next run left.
    /// A job that cannot be handled now is left for the next pass (the error is returned
    /// after the others were handled, so the caller tries again soon).
    pub async fn pass(&self, now_ms: u64) -> Result<Option<u64>, CronError> {
        let mut failed = None;
        for job in self.store.cron_jobs()? {
            if let Some(due) = job.next_ms.filter(|due| *due <= now_ms)
                && let Err(e) = self.handle(&job, due, now_ms).await
            {
                tracing::warn!(job = %job.id, error = %e, "cron: cannot fire a job; trying again");
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(self
            .store
            .cron_jobs()?
            .iter()
            .filter_map(|j| j.next_ms)
            .min())
    }

    /// Handles `job`'s run scheduled at `due_ms`: queues it (unless it is skipped) and then
    /// moves the job on.
    async fn handle(&self, job: &CronJob, due_ms: u64, now_ms: u64) -> Result<(), CronError> {
        let missed = now_ms.saturating_sub(due_ms) > MISSED_AFTER_MS;
        let in_hours = job.active_hours.as_ref().is_none_or(|h| h.contains(now_ms));
        let mut fired = in_hours && !(missed && job.missed == Missed::Skip);
        if fired {
            match self.target(job)? {
                Some(to) => {
                    let turn = turn_of(job, to, due_ms, now_ms);
                    let seq = self.fire.fire(&run_key(&job.id, due_ms), turn).await?;
                    tracing::info!(job = %job.id, session = %job.session_key, ?seq, missed, "cron: job fired");
                }
                None => {
                    tracing::warn!(job = %job.id, session = %job.session_key, "cron: the session has no chat to answer in yet; run skipped");
                    fired = false;
                }
            }
        } else {
            tracing::info!(job = %job.id, missed, in_hours, "cron: run skipped");
        }
        let next = match job.schedule.next_after(now_ms.max(due_ms)) {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "cron: no next run; the job ends");
                None
            }
        };
        self.store
            .advance_cron(&job.id, due_ms, next, fired)
            .await?;
        Ok(())
    }

    /// Where `job`'s answer goes: its own target, or where its session last replied.
    fn target(&self, job: &CronJob) -> Result<Option<Conversation>, CronError> {
        match &job.target {
            Some(to) => Ok(Some(to.clone())),
            None => Ok(self.store.target(&job.session_key)?),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
