//! The operator's side of the schedules: `chela cron` through the RPC's `cron.*` methods,
//! and `chela cron list|add|rm` on the store itself when no gateway runs. The operator may
//! name any session and act on any job but those the config keeps; a job is checked by the
//! rules of `jobs.rs` that the agent's `cron` tool goes through too.

use tokio::sync::Notify;

use crate::agent::tools::cron::{CronAction, CronSpec};
use crate::config::Config;
use crate::cron::jobs::{self, NewJob};
use crate::cron::{CronError, Fire};
use crate::domain::session_key::SessionKey;
use crate::rpc::api::CronReply;
use crate::rpc::protocol::{Fault, INTERNAL_ERROR, INVALID_PARAMS, UNAVAILABLE};
use crate::store::{CronJob, CronOrigin, Store};

/// The job `spec` asks for, made by the operator at `now_ms`: in session `spec.target`
/// (default: the terminal user's, as `chela agent`), answering where that session last
/// replied.
pub fn new_job(config: &Config, spec: CronSpec, now_ms: u64) -> Result<CronJob, CronError> {
    let session_key = match spec.target.clone() {
        Some(key) => SessionKey::parse(&key)
            .map_err(|e| CronError::Refused(format!("session {key:?}: {e}")))?
            .to_string(),
        None => crate::intake::default_session_key(config),
    };
    let new = NewJob::from_spec(spec, session_key, None, CronOrigin::Operator)?;
    jobs::build(new, now_ms)
}

/// Adds the job `spec` asks for to `store` and wakes the scheduler (`wake`); returns it and
/// whether its session has a chat to answer in yet.
pub async fn add(
    store: &Store,
    config: &Config,
    wake: &Notify,
    spec: CronSpec,
) -> Result<(CronJob, bool), CronError> {
    let job = new_job(config, spec, crate::domain::message::now_ms())?;
    let job = jobs::add(store, wake, job).await?;
    let answers_known = store.target(&job.session_key)?.is_some();
    Ok((job, answers_known))
}

/// Job `id`, unless the config keeps it.
pub fn changeable(store: &Store, id: &str) -> Result<CronJob, CronError> {
    let job = store
        .cron_job(id)?
        .ok_or_else(|| CronError::NotFound(id.to_owned()))?;
    jobs::changeable(&job)?;
    Ok(job)
}

/// Removes job `id` (not one the config keeps) and wakes the scheduler.
pub async fn remove(store: &Store, wake: &Notify, id: &str) -> Result<CronJob, CronError> {
    changeable(store, id)?;
    jobs::remove(store, wake, id).await
}

/// What the operator's jobs use in a running gateway: its store and config, the
/// scheduler's wake-up, and intake's queue for a run now.
pub struct Jobs<'a> {
    /// The store.
    pub store: &'a Store,
    /// The configuration in force.
    pub config: &'a Config,
    /// Wakes the scheduler.
    pub wake: &'a Notify,
    /// Queues a run now.
    pub fire: &'a dyn Fire,
}

/// Does the operator's `action` in a running gateway.
pub async fn call(at: Jobs<'_>, action: CronAction) -> Result<CronReply, CronError> {
    match action {
        CronAction::List => Ok(CronReply::Jobs(at.store.cron_jobs()?)),
        CronAction::Add(spec) => {
            let (job, answers_known) = add(at.store, at.config, at.wake, spec).await?;
            tracing::info!(job = %job.id, session = %job.session_key, "cron: the operator added a job");
            Ok(CronReply::Added { job, answers_known })
        }
        CronAction::Remove(id) => {
            let job = remove(at.store, at.wake, &id).await?;
            tracing::info!(job = %job.id, "cron: the operator removed a job");
            Ok(CronReply::Removed(job))
        }
        CronAction::Run(id) => {
            changeable(at.store, &id)?;
            let seq = jobs::run_now(at.store, at.fire, &id).await?;
            Ok(CronReply::Queued {
                id,
                run_id: crate::domain::run::run_id_for(&[seq]),
            })
        }
    }
}

/// The RPC fault for `e`.
pub fn fault(e: CronError) -> Fault {
    let code = match &e {
        CronError::Store(_) => INTERNAL_ERROR,
        CronError::Queue(_) => UNAVAILABLE,
        CronError::Schedule(_) | CronError::Refused(_) | CronError::NotFound(_) => INVALID_PARAMS,
    };
    Fault::new(code, e.to_string())
}
