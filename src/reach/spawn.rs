//! The agent's [`Spawner`]: what `sessions_spawn` does (SPEC 4). `runtime: "subagent"` is
//! the runner's `subagents`; with `runtime: "acp"`:
//!
//! - `thread: true`: a new thread (or topic) under the parent's conversation is bound to the
//!   coding agent and the task becomes its first message, so the user can keep talking to it.
//! - otherwise: the agent does the task once, in a process of its own, and its answer is the
//!   tool result; with `stream_to: "parent"` its output also streams into the parent's chat.

use chela_channel::{Inbound, Sender};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::rule::asked_by_owner;
use super::{Handles, ReachTools};
use crate::acp::command::Placement;
use crate::acp::manager::resolve_cwd;
use crate::agent::provider::BoxFuture;
use crate::agent::tools::refusal::ToolRefusal;
use crate::agent::tools::spawn::{Runtime, SpawnRequest, Spawner};
use crate::commands::acp::start_binding;
use crate::reply::stream_events;
use crate::runner::subagents;

/// The refusal of `sessions_spawn` with `runtime: "acp"` for a run not wholly asked by an
/// owner.
pub const ACP_OWNER_ONLY: &str = "refused: only an owner may start a coding agent \
     (sessions_spawn with runtime \"acp\", like /acp): this run has a message that did not \
     come from an owner. runtime \"subagent\" is open to everyone";

/// Events buffered between a one-off agent turn and its live reply.
const EVENT_BUFFER: usize = 256;

impl Spawner for ReachTools {
    fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let host = self.handles();
        Box::pin(async move {
            let host = host?;
            if host
                .store
                .subagent(&request.parent_session)
                .ok()
                .flatten()
                .is_some()
            {
                return Err(crate::agent::tools::spawn::NESTED_REFUSAL.into());
            }
            if request.runtime == Runtime::Subagent {
                let agent = &host.config.agent.id;
                let placement = &*host.placement;
                return subagents::spawn(&host.store, placement, agent, &request).await;
            }
            // A coding agent runs in any folder and chela serves it files there, as `/acp`
            // does: owners only, by the reach rule's test (every message of the run from one).
            if !asked_by_owner(&host, &request.parent_session, &request.run_id) {
                return Err(ToolRefusal::Refused(ACP_OWNER_ONLY.to_owned()));
            }
            let name = request
                .agent
                .clone()
                .unwrap_or_else(|| host.acp.config().default_agent.clone());
            if request.thread {
                in_thread(&host, &request, &name).await
            } else {
                once(&host, &request, &name, &cancel).await
            }
        })
    }
}

/// Binds a new thread under the parent's conversation and sends it the task.
async fn in_thread(
    host: &Handles,
    request: &SpawnRequest,
    name: &str,
) -> Result<String, ToolRefusal> {
    let parent = request
        .parent_target
        .clone()
        .ok_or("the parent conversation is unknown")?;
    let from = Inbound {
        conversation: parent,
        sender: Sender {
            id: crate::inbound::route::SYSTEM_SENDER.to_owned(),
            name: crate::inbound::route::SYSTEM_SENDER.to_owned(),
            username: None,
        },
        message_id: format!("spawn-{}", uuid::Uuid::new_v4().simple()),
        text: request.task.clone(),
        reply_to: None,
        mentioned: true,
        interaction: None,
        attachments: Vec::new(),
        timestamp_ms: crate::domain::message::now_ms(),
    };
    let started = start_binding(
        &*host.commands,
        &from,
        &request.parent_session,
        name,
        Placement::ThreadAuto,
        request.cwd.clone(),
        request.label.clone(),
    )
    .await
    .map_err(refusal)?;
    let mut first = from;
    first.conversation = started.binding.conversation.clone();
    let router = crate::intake::Router::new(host.intake.clone());
    router
        .accept_for(started.binding.session_key.clone(), first)
        .await
        .map_err(|e| {
            ToolRefusal::Failed(format!(
                "the agent started but the task could not be queued: {e}"
            ))
        })?;
    let place = if started.in_new_thread {
        "a new thread"
    } else {
        "this conversation"
    };
    Ok(format!(
        "Started {} in {place} (folder {}); the task was sent there and its answers appear \
         there. The user can keep talking to it in that thread.",
        started.agent,
        started.binding.cwd.display()
    ))
}

/// Runs the task once and returns the agent's answer.
async fn once(
    host: &Handles,
    request: &SpawnRequest,
    name: &str,
    cancel: &CancellationToken,
) -> Result<String, ToolRefusal> {
    let cwd = match &request.cwd {
        Some(cwd) => {
            let parent = host.agents.for_key(&request.parent_session);
            resolve_cwd(&parent.tool_context.workspace, cwd)?
        }
        None => {
            let cwd = host.acp.default_cwd(name);
            std::fs::create_dir_all(&cwd)
                .map_err(|e| format!("cannot create {}: {e}", cwd.display()))?;
            cwd
        }
    };
    let live = if request.stream_to_parent {
        request.parent_target.clone().and_then(|to| {
            host.notices
                .channel(&to.channel)
                .map(|channel| (channel, to))
        })
    } else {
        None
    };
    let (events, reply) = match live {
        Some((channel, to)) => {
            let (tx, rx) = mpsc::channel(EVENT_BUFFER);
            (
                Some(tx),
                Some(tokio::spawn(stream_events(
                    channel,
                    to,
                    None,
                    None,
                    rx,
                    0,
                    std::future::ready(()),
                ))),
            )
        }
        None => (None, None),
    };
    let result = host
        .acp
        .run_once(name, &cwd, &request.task, cancel, events)
        .await;
    if let Some(reply) = reply
        && let Ok(mut streamed) = reply.await
    {
        let shown = match &result {
            Ok(_) => streamed.final_text(),
            Err(e) => format!("{}\n\n⚠️ {e}", streamed.reply.text()),
        };
        if let Err(e) = streamed.reply.finish(&shown).await {
            tracing::warn!(error = %e, "cannot finish the coding agent's live reply");
        }
    }
    result
        .map(|text| format!("{name} answered:\n\n{text}"))
        .map_err(|e| ToolRefusal::Failed(e.to_string()))
}

/// What the model hears when a binding could not be made: a request it can fix is refused,
/// a failure of the platform or the agent is reported as one.
fn refusal(e: crate::commands::acp::BindError) -> ToolRefusal {
    use crate::commands::acp::BindError as B;
    match e {
        B::Harness(_) | B::NotInstalled { .. } | B::BadCwd(_) | B::AlreadyBound(_) => {
            ToolRefusal::Refused(e.to_string())
        }
        B::CreateCwd { .. } | B::Thread { .. } | B::Start { .. } => {
            ToolRefusal::Failed(e.to_string())
        }
    }
}
