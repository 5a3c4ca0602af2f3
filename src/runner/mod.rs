//! The runner stage: one turn at a time per session, as the lanes ask ([`lane::Runner`]):
//! the turn's files are downloaded (`media.rs`), chela's agent or the bound coding agent
//! runs it with its events on the run bus (`live.rs`) and in the chat (`turn.rs`), and the
//! run settles (`settle.rs`): its final recorded in the outbox with its pending entries
//! cleared, and handed to delivery; a sub-agent's result goes to its parent.
//!
//! The stage takes what it uses at construction (the config, store, agents, coding-agent
//! manager, notices, run bus and shutdown token); where sessions run (which holds the lanes
//! that hold the runner) only through [`RunnerPort`], which also ends a sub-agent's turn
//! (`subagents.rs`) with that placement.

mod live;
pub mod media;
mod settle;
mod settle_again;
pub mod stop;
pub mod subagents;
mod turn;

use std::sync::{Arc, Weak};

use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::acp::AcpManager;
use crate::agent::Agents;
use crate::agent::provider::BoxFuture;
use crate::agent::run::{RunOutcome, RunStatus, Steer};
use crate::cluster::StillHeld;
use crate::config::Config;
use crate::delivery::Notices;
use crate::domain::events::LiveEvent;
use crate::domain::run::{RunRecord, run_id_for};
use crate::lane::{self, QueuedTurn};
use crate::store::{Store, SubagentLink};

pub use live::{LIVE_BUFFER, RunBus, tee};

/// The channel of a sub-agent's conversation: nobody reads it; its answer goes to its parent.
pub const INTERNAL_CHANNEL: &str = "subagent";

/// What the runner asks of the rest of the gateway.
pub trait RunnerPort: Send + Sync {
    /// For a reply in session `key`: whether this node still holds the session, asked before
    /// each new message; `None` when it always does.
    fn still_held(&self, key: &str) -> Option<StillHeld>;
    /// Whether `turn` of session `key` may start here now ([`lane::Runner::hold`]).
    fn hold(&self, key: &str, turn: &QueuedTurn) -> lane::Hold;
    /// Gives messages `seqs` of session `key` back to be handed out again in order (on a
    /// cluster).
    fn give_back(&self, key: &str, seqs: &[u64]);
    /// Ends sub-agent `key`'s turn: settles the child and hands its result to its parent.
    fn finish_subagent<'a>(
        self: Arc<Self>,
        key: &'a str,
        link: SubagentLink,
        turn: &'a QueuedTurn,
        outcome: &'a RunOutcome,
    ) -> BoxFuture<'a, ()>;
}

/// What [`TurnRunner::new`] takes.
pub struct RunnerParts {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The store.
    pub store: Store,
    /// The agents: the default one and those of `[[agents]]`.
    pub agents: Arc<Agents>,
    /// Coding-agent bindings and their processes.
    pub acp: Arc<AcpManager>,
    /// The channels, and notices in them after their finals (the outbox).
    pub notices: Notices,
    /// Every run's events as they happen.
    pub live: broadcast::Sender<LiveEvent>,
    /// Fires when the gateway stops.
    pub shutdown: CancellationToken,
    /// The rest of the gateway (weak: it owns the lanes that own this runner).
    pub port: Weak<dyn RunnerPort>,
}

/// The handles a turn runs with.
struct Handles {
    config: Arc<Config>,
    store: Store,
    agents: Arc<Agents>,
    acp: Arc<AcpManager>,
    notices: Notices,
    live: broadcast::Sender<LiveEvent>,
    shutdown: CancellationToken,
    port: Weak<dyn RunnerPort>,
}

/// The lanes' [`lane::Runner`]: runs turns through the agent and delivers their replies.
pub struct TurnRunner {
    handles: Arc<Handles>,
}

impl TurnRunner {
    /// The runner over `parts`.
    pub fn new(parts: RunnerParts) -> TurnRunner {
        let handles = Handles {
            config: parts.config,
            store: parts.store,
            agents: parts.agents,
            acp: parts.acp,
            notices: parts.notices,
            live: parts.live,
            shutdown: parts.shutdown,
            port: parts.port,
        };
        TurnRunner {
            handles: Arc::new(handles),
        }
    }
}

impl lane::Runner for TurnRunner {
    fn run(
        &self,
        key: String,
        turn: QueuedTurn,
        cancel: CancellationToken,
        steer: mpsc::Receiver<Box<Steer>>,
    ) -> BoxFuture<'static, RunOutcome> {
        let handles = self.handles.clone();
        Box::pin(async move {
            let Some(port) = handles.port.upgrade() else {
                return RunOutcome {
                    status: RunStatus::Error(crate::domain::run::RunError::ShuttingDown),
                    text: String::new(),
                    steered_seqs: Vec::new(),
                    leftover: Vec::new(),
                    usage: Default::default(),
                    context_tokens: 0,
                    cost_usd: None,
                };
            };
            let span = tracing::info_span!("run", session = %key);
            turn::run_turn(&handles, port, key, turn, cancel, steer)
                .instrument(span)
                .await
        })
    }

    fn hold(&self, key: &str, turn: &QueuedTurn) -> lane::Hold {
        match self.handles.port.upgrade() {
            Some(port) => port.hold(key, turn),
            None => lane::Hold::Go,
        }
    }

    fn give_back(&self, key: &str, seqs: &[u64]) {
        if let Some(port) = self.handles.port.upgrade() {
            port.give_back(key, seqs);
        }
    }

    fn notice(&self, to: &chela_channel::Conversation, text: String) {
        if self.handles.port.strong_count() > 0 {
            let (notices, to) = (self.handles.notices.clone(), to.clone());
            tokio::spawn(async move { notices.say(&to, &text).await });
        }
    }

    fn waiting(&self, turn: &QueuedTurn) -> BoxFuture<'static, std::convert::Infallible> {
        let channel = match self.handles.port.strong_count() {
            0 => None,
            _ => self.handles.notices.channel(&turn.target.channel),
        };
        let to = turn.target.clone();
        Box::pin(async move {
            match channel {
                Some(channel) => crate::reply::keep_typing(channel, to).await,
                None => std::future::pending().await,
            }
        })
    }

    /// Ends the dropped turns on the bus as runs that were stopped before they ran, so
    /// `agent.wait` and `events.subscribe` learn it at once.
    fn dropped(&self, key: &str, seqs: &[u64]) {
        if self.handles.port.strong_count() == 0 || seqs.is_empty() {
            return;
        }
        let now = crate::domain::message::now_ms();
        let record = RunRecord {
            run_id: run_id_for(seqs),
            seqs: seqs.to_vec(),
            session_key: key.to_owned(),
            status: RunStatus::Aborted,
            text: String::new(),
            started_ms: now,
            ended_ms: now,
            usage: Default::default(),
            context_tokens: 0,
            cost_usd: None,
        };
        let event = LiveEvent {
            run_id: record.run_id.clone(),
            session_key: key.to_owned(),
            seq: 1,
            event: crate::domain::events::RunEvent::Finished(Box::new(record)),
        };
        // No subscriber is no error: nobody waits.
        let _ = self.handles.live.send(event);
    }
}
