//! Scheduled jobs: what runs when, where its answer goes, and when it last and next fires.

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use super::StoreFuture;
use crate::domain::schedule::{ActiveHours, Missed, Schedule};
use crate::store::error::StoreError;

/// Who made a job: what may change it, and how it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CronOrigin {
    /// A `[[cron]]` entry of the config (seeded at every start).
    Config,
    /// The operator (`chela cron add`).
    Operator,
    /// The agent's `cron` tool.
    Agent,
    /// `[heartbeat]`.
    Heartbeat,
}

/// One scheduled job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CronJob {
    /// Its id (unique in the store).
    pub id: String,
    /// When it runs.
    pub schedule: Schedule,
    /// The session it belongs to: whose turn it is, unless it is isolated.
    pub session_key: String,
    /// It runs in a session of its own (`agent:<a>:cron:<id>`, see
    /// [`CronJob::run_session`]) rather than in `session_key`; its answers still go to the
    /// target (or where `session_key` last replied).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
    /// Where the answer goes; `None`: where the session last replied (known at fire time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Conversation>,
    /// The message the turn runs.
    pub message: String,
    /// What a run missed while the gateway was down does.
    #[serde(default)]
    pub missed: Missed,
    /// Who made it.
    pub origin: CronOrigin,
    /// When it was made, ms since the epoch.
    pub created_ms: u64,
    /// Its next run (ms since the epoch); `None` for a job with none left.
    pub next_ms: Option<u64>,
    /// The scheduled time of its last run, if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ms: Option<u64>,
    /// Runs outside this daily window are skipped (the heartbeat's active hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_hours: Option<ActiveHours>,
}

impl CronJob {
    /// The session its turns run in: `session_key`, or for an isolated job its own
    /// `agent:<a>:cron:<id>` (`<a>`: `session_key`'s agent; `main` when that does not parse,
    /// which jobs are checked against when made).
    pub fn run_session(&self) -> String {
        use crate::domain::session_key::{KeyBase, SessionKey};
        if !self.isolated {
            return self.session_key.clone();
        }
        let agent = SessionKey::parse(&self.session_key)
            .map(|k| k.agent)
            .unwrap_or_else(|_| "main".to_owned());
        SessionKey::new(
            agent,
            KeyBase::Cron {
                id: self.id.clone(),
            },
        )
        .to_string()
    }

    /// The job after its run scheduled at `due_ms` was handled (`fired`: it was queued,
    /// else skipped): `None` when nothing changes (its next run is no longer `due_ms`: another
    /// node or an edit got there first), `Some(None)` when it has no run left and goes,
    /// `Some(Some(job))` with its next run set to `next_ms`.
    pub fn advanced(
        &self,
        due_ms: u64,
        next_ms: Option<u64>,
        fired: bool,
    ) -> Option<Option<CronJob>> {
        if self.next_ms != Some(due_ms) {
            return None;
        }
        if next_ms.is_none() {
            return Some(None);
        }
        let mut job = self.clone();
        job.next_ms = next_ms;
        if fired {
            job.last_ms = Some(due_ms);
        }
        Some(Some(job))
    }
}

/// Scheduled jobs, by id. The scheduler of every node reads them; a run is queued with a
/// dedupe key of (job, scheduled time) before [`CronStore::advance_cron`] moves the job on,
/// so a crash between the two steps (or a second node doing the same) queues it once.
pub trait CronStore {
    /// Writes `job` (new, or replacing the one with its id). Durable.
    fn put_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, ()>;

    /// Writes new `job` unless a job with its id exists; returns whether it did. Atomic: of
    /// several callers adding the same id exactly one gets true. Durable.
    fn add_cron<'a>(&'a self, job: &'a CronJob) -> StoreFuture<'a, bool>;

    /// The job called `id`.
    fn cron_job(&self, id: &str) -> Result<Option<CronJob>, StoreError>;

    /// Every job, by id.
    fn cron_jobs(&self) -> Result<Vec<CronJob>, StoreError>;

    /// Removes the job called `id`; returns whether it was there. Durable.
    fn remove_cron<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;

    /// Moves job `id` past its run scheduled at `due_ms` (see [`CronJob::advanced`]): only
    /// when its next run still is `due_ms`; a job with no next run is removed. Returns whether
    /// it changed. Atomic: of several callers with the same `due_ms` exactly one gets true.
    /// Durable.
    fn advance_cron<'a>(
        &'a self,
        id: &'a str,
        due_ms: u64,
        next_ms: Option<u64>,
        fired: bool,
    ) -> StoreFuture<'a, bool>;
}
