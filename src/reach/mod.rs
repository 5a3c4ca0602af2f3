//! The agent's reach past its own turn: the gateway's side of the tools that act beyond the
//! run's session (SPEC 4, 7), each under one rule of who reaches what (`rule.rs`):
//!
//! - `sessions.rs`: `message` into another session, `sessions_list`, `sessions_history`.
//! - `actions.rs`: the `message` tool's actions (react, edit, delete, pin, poll); `own.rs`
//!   the messages the agent sent, which only it may edit and delete.
//! - `spawn.rs`: `sessions_spawn`, a sub-agent (the runner's `subagents`) or a coding agent
//!   (bound to a new thread through the commands' `start_binding`, or run once).
//! - `cron.rs`: the `cron` tool, jobs in the calling session or, for an owner, any.
//!
//! The tools are built with the agent, before the stages they reach exist, so
//! [`ReachTools`] holds the gateway weakly ([`Host`]) and takes its [`Handles`] at each call.

mod actions;
mod cron;
mod own;
mod rule;
mod sessions;
mod spawn;

use std::sync::{Arc, Weak};

use crate::acp::AcpManager;
use crate::agent::Agents;
use crate::agent::tools::refusal::ToolRefusal;
use crate::cluster::Placement;
use crate::commands::CommandContext;
use crate::config::Config;
use crate::delivery::Notices;
use crate::intake::Intake;
use crate::store::Store;

/// What the tools' side uses of the running gateway, handed over at each call.
pub struct Handles {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The store.
    pub store: Store,
    /// The agents (whose session is whose, workspaces).
    pub agents: Arc<Agents>,
    /// Coding-agent bindings and their processes.
    pub acp: Arc<AcpManager>,
    /// Where sessions run (a sub-agent's first turn, its result).
    pub placement: Arc<dyn Placement>,
    /// Intake: a task into a new thread, a job's run now.
    pub intake: Arc<Intake>,
    /// The channels, and short messages into them.
    pub notices: Notices,
    /// Wakes the scheduler when jobs change.
    pub cron_wake: Arc<tokio::sync::Notify>,
    /// The commands' port (a coding agent bound to a new thread, as `/acp spawn` does).
    pub commands: Arc<dyn CommandContext>,
}

impl Handles {
    /// Whether `sender_id` owns the bot on `channel` (SPEC 2.3).
    fn is_owner(&self, channel: &str, sender_id: &str) -> bool {
        crate::intake::is_owner(&self.config, &self.store, channel, sender_id)
    }
}

/// Where [`ReachTools`] gets its [`Handles`]: the running gateway.
pub trait Host: Send + Sync {
    /// The handles of the stages the tools reach.
    fn handles(self: Arc<Self>) -> Handles;
}

/// The agent's `sessions_*`, `message` (to another session) and `cron` tools' gateway side:
/// one value behind the agent's three ports ([`Spawner`](crate::agent::tools::spawn::Spawner),
/// [`SessionsApi`](crate::agent::tools::sessions::SessionsApi),
/// [`CronApi`](crate::agent::tools::cron::CronApi)).
pub struct ReachTools {
    /// The gateway (weak: it owns the agent that holds these tools).
    host: Weak<dyn Host>,
}

impl ReachTools {
    /// Tools over `host`.
    pub fn new(host: Weak<dyn Host>) -> Self {
        ReachTools { host }
    }

    /// The handles now; a refusal once the gateway is gone.
    fn handles(&self) -> Result<Handles, ToolRefusal> {
        Ok(self
            .host
            .upgrade()
            .ok_or(ToolRefusal::ShuttingDown)?
            .handles())
    }
}
