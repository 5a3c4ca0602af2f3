//! The `cron` tool's gateway side ([`CronApi`]): a job runs in the calling session and
//! answers in its conversation; another session, or a job of another session, needs the
//! asker to be an owner.

use std::sync::Arc;

use super::rule::asked_by_owner;
use super::{Handles, ReachTools};
use crate::agent::provider::BoxFuture;
use crate::agent::tools::cron::{CronAction, CronApi, CronCall, CronSpec};
use crate::agent::tools::refusal::ToolRefusal;
use crate::cron::jobs::{self, NewJob};
use crate::cron::{CronError, IntakeFire};
use crate::store::{CronJob, CronOrigin};

/// The most jobs the agent may keep in one session.
pub const MAX_AGENT_JOBS_PER_SESSION: usize = 20;

impl From<CronError> for ToolRefusal {
    fn from(e: CronError) -> Self {
        match e {
            CronError::Store(e) => ToolRefusal::Failed(e.to_string()),
            CronError::Queue(e) => ToolRefusal::Failed(e),
            e => ToolRefusal::Refused(e.to_string()),
        }
    }
}

impl CronApi for ReachTools {
    fn call(&self, call: CronCall) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let host = self.handles();
        Box::pin(async move {
            let host = host?;
            // The same owner rule as the session tools' (`rule.rs`).
            let owner = asked_by_owner(&host, &call.from, &call.run_id);
            match call.action {
                CronAction::List => Ok(list(&host, &call.from, owner)?),
                CronAction::Add(spec) => add(&host, &call.from, call.reply_to, spec, owner).await,
                CronAction::Remove(id) => {
                    mine(&host, &id, &call.from, owner)?;
                    let job = jobs::remove(&host.store, &host.cron_wake, &id).await?;
                    Ok(format!("Removed job `{}`.", job.id))
                }
                CronAction::Run(id) => {
                    mine(&host, &id, &call.from, owner)?;
                    let fire = IntakeFire::new(Arc::downgrade(&host.intake));
                    let seq = jobs::run_now(&host.store, &fire, &id).await?;
                    Ok(format!("Job `{id}` queued to run now (run-{seq})."))
                }
            }
        })
    }
}

/// Job `id`, when the caller may act on it: its own session's job, or any with `owner`.
fn mine(host: &Handles, id: &str, from: &str, owner: bool) -> Result<CronJob, ToolRefusal> {
    let job = host
        .store
        .cron_job(id)?
        .filter(|job| owner || job.session_key == from)
        .ok_or_else(|| ToolRefusal::Refused(format!("no job `{id}` in this session")))?;
    jobs::changeable(&job)?;
    Ok(job)
}

/// The jobs the caller may see, one line each.
fn list(host: &Handles, from: &str, owner: bool) -> Result<String, ToolRefusal> {
    let now = crate::domain::message::now_ms();
    let lines: Vec<String> = host
        .store
        .cron_jobs()?
        .iter()
        .filter(|job| owner || job.session_key == from)
        .map(|job| jobs::describe(job, now))
        .collect();
    Ok(if lines.is_empty() {
        "No jobs.".to_owned()
    } else {
        lines.join("\n")
    })
}

/// Refuses a new agent job in `session_key` when `jobs` hold [`MAX_AGENT_JOBS_PER_SESSION`]
/// of the agent's there already.
fn room_for_one_more(jobs: &[CronJob], session_key: &str) -> Result<(), ToolRefusal> {
    let at_most = MAX_AGENT_JOBS_PER_SESSION;
    let made = jobs
        .iter()
        .filter(|j| j.origin == CronOrigin::Agent && j.session_key == session_key)
        .count();
    if made >= at_most {
        return Err(ToolRefusal::Refused(format!(
            "this session has {made} jobs already (at most {at_most}); remove one first"
        )));
    }
    Ok(())
}

/// Adds the job `spec` asks for.
async fn add(
    host: &Handles,
    from: &str,
    reply_to: Option<chela_channel::Conversation>,
    spec: CronSpec,
    owner: bool,
) -> Result<String, ToolRefusal> {
    let (session_key, target) = match spec.target.clone() {
        Some(other) if other != from => {
            if !owner {
                return Err(ToolRefusal::Refused(
                    "only an owner may schedule jobs into another session".into(),
                ));
            }
            // Its answers go where that session last replied.
            (other, None)
        }
        _ => (from.to_owned(), reply_to),
    };
    room_for_one_more(&host.store.cron_jobs()?, &session_key)?;
    let now = crate::domain::message::now_ms();
    let new = NewJob::from_spec(spec, session_key, target, CronOrigin::Agent)?;
    let job = jobs::build(new, now)?;
    let job = jobs::add(&host.store, &host.cron_wake, job).await?;
    Ok(format!("Scheduled: {}", jobs::describe(&job, now)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::schedule::{Missed, Schedule};

    fn agent_job(id: &str, session: &str, origin: CronOrigin) -> CronJob {
        CronJob {
            id: id.into(),
            schedule: Schedule::every("1h", 0).unwrap(),
            session_key: session.into(),
            isolated: false,
            target: None,
            message: "tick".into(),
            missed: Missed::RunOnce,
            origin,
            created_ms: 0,
            next_ms: Some(3_600_000),
            last_ms: None,
            active_hours: None,
        }
    }

    #[test]
    fn the_agent_keeps_at_most_twenty_jobs_per_session() {
        let mine = "agent:main:telegram:direct:1";
        let mut jobs: Vec<CronJob> = (0..19)
            .map(|i| agent_job(&format!("j{i}"), mine, CronOrigin::Agent))
            .collect();
        // Another session's jobs and the operator's do not count.
        jobs.push(agent_job(
            "other",
            "agent:main:telegram:direct:2",
            CronOrigin::Agent,
        ));
        jobs.push(agent_job("op", mine, CronOrigin::Operator));
        assert!(room_for_one_more(&jobs, mine).is_ok());
        jobs.push(agent_job("j19", mine, CronOrigin::Agent));
        let refused = room_for_one_more(&jobs, mine).unwrap_err();
        assert!(refused.to_string().contains("at most 20"), "{refused}");
    }
}
