//! `/acp ...` and `/session ...` (SPEC 4): spawning, inspecting and ending coding-agent
//! bindings from the chat.

use chela_channel::{ChatKind, Inbound};

use super::CommandContext;
use crate::acp::SpawnSpec;
use crate::acp::command::{ACP_USAGE, AcpCommand, Placement, SessionCommand};
use crate::acp::harness;
use crate::acp::manager::resolve_cwd;
use crate::store::Binding;

/// Handles `/acp ARGS` from `inbound` (session `key`). Returns the answer, and a message to
/// run next (`/acp steer`).
pub async fn acp(
    ctx: &dyn CommandContext,
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
        AcpCommand::Agents => agents(ctx),
        AcpCommand::Status => match ctx.acp().status(key).await {
            Some(status) => status,
            None => "This conversation is not bound to a coding agent. /acp spawn starts one."
                .to_owned(),
        },
        AcpCommand::Cancel => {
            if ctx.acp().binding(key).is_none() {
                return (
                    "This conversation is not bound to a coding agent.".to_owned(),
                    None,
                );
            }
            match ctx.lanes().stop(key).await {
                Ok(report) if report.stopped_run => "Cancelled.".to_owned(),
                Ok(_) => "Nothing to cancel.".to_owned(),
                Err(e) => format!("Cannot cancel: {e}"),
            }
        }
        AcpCommand::Close => close(ctx, key).await,
        AcpCommand::Steer(text) => {
            if ctx.acp().binding(key).is_none() {
                return (
                    "This conversation is not bound to a coding agent.".to_owned(),
                    None,
                );
            }
            let _ = ctx.lanes().stop(key).await;
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
        } => spawn(ctx, inbound, harness, placement, cwd, label).await,
    };
    (answer, None)
}

/// Handles `/session ARGS` for session `key`.
pub async fn session(ctx: &dyn CommandContext, key: &str, args: &str) -> String {
    match crate::acp::command::parse_session(args) {
        Err(e) => e.to_string(),
        Ok(SessionCommand::Unbind) => close(ctx, key).await,
        Ok(SessionCommand::Idle(idle)) => match ctx.acp().set_idle(key, idle).await {
            Ok(_) => format!(
                "This binding now expires after {} without messages.",
                humantime::format_duration(idle)
            ),
            Err(e) => e.to_string(),
        },
    }
}

async fn close(ctx: &dyn CommandContext, key: &str) -> String {
    let _ = ctx.lanes().stop(key).await;
    match ctx.acp().close(key).await {
        Ok(Some(binding)) => format!(
            "Closed {}; this conversation talks to chela again.",
            binding.harness
        ),
        Ok(None) => "This conversation is not bound to a coding agent.".to_owned(),
        Err(e) => format!("Cannot close: {e}"),
    }
}

fn agents(ctx: &dyn CommandContext) -> String {
    let path = std::env::var("PATH").ok();
    let default = &ctx.acp().config().default_agent;
    ctx.acp()
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
    ctx: &dyn CommandContext,
    inbound: &Inbound,
    harness_name: Option<String>,
    placement: Placement,
    cwd: Option<String>,
    label: Option<String>,
) -> String {
    let name = harness_name.unwrap_or_else(|| ctx.acp().config().default_agent.clone());
    let key = ctx.session_key(inbound);
    match start_binding(ctx, inbound, &key, &name, placement, cwd, label).await {
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
        Err(e) => e.to_string(),
    }
}

/// Why a binding could not be made; the text is ready to show in the chat.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// No such harness is configured or built in.
    #[error(transparent)]
    Harness(crate::acp::AcpError),
    /// The harness's command is not usable here.
    #[error("{name} is {installed}. Install it or set [acp.agents.{name}] command.")]
    NotInstalled {
        /// The harness.
        name: String,
        /// What was found (`not installed`, ...).
        installed: String,
    },
    /// `--cwd` names no usable folder.
    #[error("Bad cwd: {0}")]
    BadCwd(crate::acp::manager::CwdError),
    /// The default folder could not be created.
    #[error("Cannot create {}: {source}", path.display())]
    CreateCwd {
        /// The folder.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The platform would not open a thread.
    #[error("Cannot open a thread here ({reason}); try /acp spawn {name} --bind here.")]
    Thread {
        /// The harness.
        name: String,
        /// The platform's refusal.
        reason: chela_channel::ChannelError,
    },
    /// The conversation is bound already.
    #[error("This conversation is already bound to {0}; /acp close first.")]
    AlreadyBound(String),
    /// The agent did not start.
    #[error("Cannot start {name}: {reason}")]
    Start {
        /// The harness.
        name: String,
        /// Why.
        reason: crate::acp::AcpError,
    },
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
/// the agent and its session; a relative `cwd` is taken in the workspace of the agent of
/// session `key` (the one asking).
pub async fn start_binding(
    ctx: &dyn CommandContext,
    from: &Inbound,
    key: &str,
    name: &str,
    placement: Placement,
    cwd: Option<String>,
    label: Option<String>,
) -> Result<Started, BindError> {
    let config = ctx.acp().config();
    let harness = harness::resolve(config, name).map_err(BindError::Harness)?;
    let path = std::env::var("PATH").ok();
    let installed = harness::installed(&harness, path.as_deref());
    if !installed.is_usable() {
        return Err(BindError::NotInstalled {
            name: name.to_owned(),
            installed: installed.to_string(),
        });
    }
    let cwd = match cwd {
        Some(requested) => {
            resolve_cwd(ctx.workspace(key), &requested).map_err(BindError::BadCwd)?
        }
        None => {
            let path = ctx.acp().default_cwd(name);
            std::fs::create_dir_all(&path).map_err(|source| BindError::CreateCwd {
                path: path.clone(),
                source,
            })?;
            path
        }
    };
    let here = &from.conversation;
    let channel = ctx.channel(&here.channel);
    let make_thread = placement == Placement::ThreadAuto
        && here.kind != ChatKind::Direct
        && channel
            .as_ref()
            .is_some_and(|c| c.limits().threads && !c.is_thread(here));
    let target = match (make_thread, channel.as_ref()) {
        (true, Some(channel)) => {
            let title = label.clone().unwrap_or_else(|| format!("{name} session"));
            channel
                .open_thread(here, &title)
                .await
                .map_err(|reason| BindError::Thread {
                    name: name.to_owned(),
                    reason,
                })?
        }
        _ => here.clone(),
    };
    let mut target_inbound = from.clone();
    target_inbound.conversation = target.clone();
    let key = ctx.session_key(&target_inbound);
    if let Some(existing) = ctx.acp().binding(&key) {
        return Err(BindError::AlreadyBound(existing.harness));
    }
    if make_thread {
        ctx.say(&target, &format!("Starting {name} in {}…", cwd.display()))
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
    let (binding, agent) = ctx
        .acp()
        .spawn(spec)
        .await
        .map_err(|reason| BindError::Start {
            name: name.to_owned(),
            reason,
        })?;
    if make_thread {
        ctx.say(
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
