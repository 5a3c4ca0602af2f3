//! The `cron` tool's gateway side ([`CronApi`]): a job runs in the calling session and
//! answers in its conversation; another session, or a job of another session, needs the
//! asker to be an owner.

use std::sync::{Arc, Weak};

use super::CronError;
use super::jobs::{self, NewJob};
use crate::agent::provider::BoxFuture;
use crate::agent::tools::cron::{CronAction, CronApi, CronCall, CronSpec};
use crate::agent::tools::refusal::ToolRefusal;
use crate::gateway::Core;
use crate::store::{CronJob, CronOrigin};

/// The gateway's [`CronApi`].
pub(in crate::gateway) struct GatewayCron {
    /// The core (weak: the agent that holds this lives in it).
    pub core: Weak<Core>,
}

impl From<CronError> for ToolRefusal {
    fn from(e: CronError) -> Self {
        match e {
            CronError::Store(e) => ToolRefusal::Failed(e.to_string()),
            CronError::Queue(e) => ToolRefusal::Failed(e),
            e => ToolRefusal::Refused(e.to_string()),
        }
    }
}

impl CronApi for GatewayCron {
    fn call(&self, call: CronCall) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let core = self.core.upgrade();
        Box::pin(async move {
            let core = core.ok_or(ToolRefusal::ShuttingDown)?;
            let owner = asked_by_owner(&core, &call.run_id);
            match call.action {
                CronAction::List => Ok(list(&core, &call.from, owner)?),
                CronAction::Add(spec) => add(&core, &call.from, call.reply_to, spec, owner).await,
                CronAction::Remove(id) => {
                    mine(&core, &id, &call.from, owner)?;
                    let job = jobs::remove(&core.store, &core.cron_wake, &id).await?;
                    Ok(format!("Removed job `{}`.", job.id))
                }
                CronAction::Run(id) => {
                    mine(&core, &id, &call.from, owner)?;
                    let seq = jobs::run_now(&core, &id).await?;
                    Ok(format!("Job `{id}` queued to run now (run-{seq})."))
                }
            }
        })
    }
}

/// Whether the message that started run `run_id` came from an owner of its channel.
fn asked_by_owner(core: &Core, run_id: &str) -> bool {
    let Some(seq) = run_id
        .strip_prefix("run-")
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return false;
    };
    let Ok(pending) = core.store.all_pending() else {
        return false;
    };
    pending.iter().any(|(s, turn)| {
        *s == seq
            && turn.inbound.sender.id != crate::inbound::route::SYSTEM_SENDER
            && core.is_owner(&turn.inbound.conversation.channel, &turn.inbound.sender.id)
    })
}

/// Job `id`, when the caller may act on it: its own session's job, or any with `owner`.
fn mine(core: &Core, id: &str, from: &str, owner: bool) -> Result<CronJob, ToolRefusal> {
    let job = core
        .store
        .cron_job(id)?
        .filter(|job| owner || job.session_key == from)
        .ok_or_else(|| ToolRefusal::Refused(format!("no job `{id}` in this session")))?;
    jobs::changeable(&job)?;
    Ok(job)
}

/// The jobs the caller may see, one line each.
fn list(core: &Core, from: &str, owner: bool) -> Result<String, ToolRefusal> {
    let now = crate::domain::message::now_ms();
    let lines: Vec<String> = core
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

/// Adds the job `spec` asks for.
async fn add(
    core: &Arc<Core>,
    from: &str,
    reply_to: Option<chela_channel::Conversation>,
    spec: CronSpec,
    owner: bool,
) -> Result<String, ToolRefusal> {
    let (session_key, target) = match spec.target {
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
    let missed = jobs::missed_of(spec.missed.as_deref())?;
    let now = crate::domain::message::now_ms();
    let job = jobs::build(
        NewJob {
            id: spec.id,
            cron: spec.cron,
            tz: spec.tz,
            at: spec.at,
            every: spec.every,
            message: spec.message,
            missed,
            session_key,
            target,
            origin: CronOrigin::Agent,
        },
        now,
    )?;
    let job = jobs::add(&core.store, &core.cron_wake, job).await?;
    Ok(format!("Scheduled: {}", jobs::describe(&job, now)))
}
