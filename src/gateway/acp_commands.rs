//! `/acp ...` and `/session ...` (SPEC 4): spawning, inspecting and ending coding-agent
//! bindings from the chat.

use std::sync::Arc;

use chela_channel::{ChatKind, Inbound};

use super::Core;
use crate::acp::SpawnSpec;
use crate::acp::command::{ACP_USAGE, AcpCommand, Placement, SessionCommand};
use crate::acp::harness;
use crate::acp::manager::resolve_cwd;
use crate::store::Binding;

/// Handles `/acp ARGS` from `inbound` (session `key`). Returns the answer, and a message to
/// run next (`/acp steer`).
pub async fn acp(
    core: &Arc<Core>,
    key: &str,
    inbound: &Inbound,
    args: &str,
) -> (String, Option<Inbound>) {
    let command = match crate::acp::command::parse_acp(args) {
        Ok(command) => command,
        Err(e) => return (e.to_string(), None),
    };
    let answer = match command {
        AcpCommand::Help => ACP_USAGE.to_owned(),
        AcpCommand::Agents => agents(core),
        AcpCommand::Status => match core.acp.status(key).await {
            Some(status) => status,
            None => "This conversation is not bound to a coding agent. /acp spawn starts one."
                .to_owned(),
        },
        AcpCommand::Cancel => {
            if core.acp.binding(key).is_none() {
                return (
                    "This conversation is not bound to a coding agent.".to_owned(),
                    None,
                );
            }
            match core.lanes.stop(key).await {
                Ok(report) if report.stopped_run => "Cancelled.".to_owned(),
                Ok(_) => "Nothing to cancel.".to_owned(),
                Err(e) => format!("Cannot cancel: {e}"),
            }
        }
        AcpCommand::Close => close(core, key).await,
        AcpCommand::Steer(text) => {
            if core.acp.binding(key).is_none() {
                return (
                    "This conversation is not bound to a coding agent.".to_owned(),
                    None,
                );
            }
            let _ = core.lanes.stop(key).await;
            let mut next = inbound.clone();
            next.text = text;
            next.message_id = format!("{}#steer", inbound.message_id);
            next.interaction = None;
            return (
                "Steering: the current turn was cancelled; your message goes next.".to_owned(),
                Some(next),
            );
        }
        AcpCommand::Spawn {
            harness,
            placement,
            cwd,
            label,
        } => spawn(core, inbound, harness, placement, cwd, label).await,
    };
    (answer, None)
}

/// Handles `/session ARGS` for session `key`.
pub async fn session(core: &Arc<Core>, key: &str, args: &str) -> String {
    match crate::acp::command::parse_session(args) {
        Err(e) => e.to_string(),
        Ok(SessionCommand::Unbind) => close(core, key).await,
        Ok(SessionCommand::Idle(idle)) => match core.acp.set_idle(key, idle).await {
            Ok(_) => format!(
                "This binding now expires after {} without messages.",
                humantime::format_duration(idle)
            ),
            Err(e) => e.to_string(),
        },
    }
}

async fn close(core: &Arc<Core>, key: &str) -> String {
    let _ = core.lanes.stop(key).await;
    match core.acp.close(key).await {
        Ok(Some(binding)) => format!(
            "Closed {}; this conversation talks to chela again.",
            binding.harness
        ),
        Ok(None) => "This conversation is not bound to a coding agent.".to_owned(),
        Err(e) => format!("Cannot close: {e}"),
    }
}

fn agents(core: &Arc<Core>) -> String {
    let path = std::env::var("PATH").ok();
    let default = &core.acp.config().default_agent;
    core.acp
        .config()
        .harnesses()
        .iter()
        .map(|(name, h)| {
            let mark = if name == default { " (default)" } else { "" };
            format!("{name}{mark}: {}", harness::installed(h, path.as_deref()))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn spawn(
    core: &Arc<Core>,
    inbound: &Inbound,
    harness_name: Option<String>,
    placement: Placement,
    cwd: Option<String>,
    label: Option<String>,
) -> String {
    let name = harness_name.unwrap_or_else(|| core.acp.config().default_agent.clone());
    match start_binding(core, inbound, &name, placement, cwd, label).await {
        Ok(started) if started.in_new_thread => format!(
            "Started {name} ({}) in a new thread, folder {}.",
            started.agent,
            started.binding.cwd.display()
        ),
        Ok(started) => format!(
            "🤖 {} is bound here, folder {}. Plain messages go to it; /acp close ends it.",
            started.agent,
            started.binding.cwd.display()
        ),
        Err(e) => e,
    }
}

/// A binding just made.
pub struct Started {
    /// The binding.
    pub binding: Binding,
    /// The agent's name and version.
    pub agent: String,
    /// True when a thread was created for it (it was told there already).
    pub in_new_thread: bool,
}

/// Binds harness `name` for the conversation of `from` (or a new thread under it), starting
/// the agent and its session. Errors are ready to show.
pub async fn start_binding(
    core: &Arc<Core>,
    from: &Inbound,
    name: &str,
    placement: Placement,
    cwd: Option<String>,
    label: Option<String>,
) -> Result<Started, String> {
    let config = core.acp.config();
    let harness = harness::resolve(config, name).map_err(|e| e.to_string())?;
    let path = std::env::var("PATH").ok();
    let installed = harness::installed(&harness, path.as_deref());
    if !installed.is_usable() {
        return Err(format!(
            "{name} is {installed}. Install it or set [acp.agents.{name}] command."
        ));
    }
    let cwd = match cwd {
        Some(requested) => resolve_cwd(&core.config.agent.workspace, &requested)
            .map_err(|e| format!("Bad cwd: {e}"))?,
        None => {
            let cwd = core.acp.default_cwd(name);
            std::fs::create_dir_all(&cwd)
                .map_err(|e| format!("Cannot create {}: {e}", cwd.display()))?;
            cwd
        }
    };
    let here = &from.conversation;
    let channel = core.channel(&here.channel);
    let make_thread = placement == Placement::ThreadAuto
        && here.kind != ChatKind::Direct
        && channel
            .as_ref()
            .is_some_and(|c| c.limits().threads && !c.is_thread(here));
    let target = match (make_thread, channel.as_ref()) {
        (true, Some(channel)) => {
            let title = label.clone().unwrap_or_else(|| format!("{name} session"));
            channel.open_thread(here, &title).await.map_err(|e| {
                format!("Cannot open a thread here ({e}); try /acp spawn {name} --bind here.")
            })?
        }
        _ => here.clone(),
    };
    let mut target_inbound = from.clone();
    target_inbound.conversation = target.clone();
    let key = core.session_key(&target_inbound);
    if let Some(existing) = core.acp.binding(&key) {
        return Err(format!(
            "This conversation is already bound to {}; /acp close first.",
            existing.harness
        ));
    }
    if make_thread {
        core.say(&target, &format!("Starting {name} in {}…", cwd.display()))
            .await;
    }
    let spec = SpawnSpec {
        session_key: key,
        conversation: target.clone(),
        harness: name.to_owned(),
        cwd,
        label,
        owner: format!("{}:{}", here.channel, from.sender.id),
    };
    let (binding, agent) = core
        .acp
        .spawn(spec)
        .await
        .map_err(|e| format!("Cannot start {name}: {e}"))?;
    if make_thread {
        core.say(
            &target,
            &format!(
                "🤖 {agent} is bound to this thread. Plain messages go to it; /acp close ends it."
            ),
        )
        .await;
    }
    Ok(Started {
        binding,
        agent,
        in_new_thread: make_thread,
    })
}
