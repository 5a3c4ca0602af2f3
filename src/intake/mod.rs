//! The intake stage: carries out the router's decisions. Every channel's messages (and the
//! RPC's, and `chela agent`'s) come here through a [`Router`]: admission (`admit.rs`, group
//! context, the pairing prompt), then [`route`](crate::inbound::route::route) decides, then
//! a command runs on the fast path, an answer reaches its question, or the message is
//! queued durably and handed to where its session runs (`carry.rs`, `queue.rs`). On several
//! nodes a message is queued as it is after admission, and the node running its session
//! routes it ([`route_queued`]).
//!
//! The stage owns the group context kept for mentions and the pace of "try later" notices;
//! it takes the store, the lanes, the placement and its task tracker at construction, and
//! reaches the rest of the gateway (questions, bindings, skills, commands, answers in the
//! chat) only through [`IntakePort`].

mod admit;
mod carry;
mod group_context;
mod pairing_prompt;
mod queue;

use std::sync::{Arc, Weak};

use chela_channel::{BoxFuture, Conversation, Inbound, InboundSink, Press, SinkError};
use tokio_util::task::TaskTracker;

use crate::acp::permission::Decision;
use crate::cluster::Placement;
use crate::config::{AccessConfig, Config};
use crate::inbound::commands::Command;
use crate::inbound::route::{Accepted, RouteFacts};
use crate::lane::Lanes;
use crate::store::Store;

pub use carry::route_queued;
pub use group_context::GroupContext;
pub use pairing_prompt::{MAX_NOTED, NOTICE_EVERY};
pub use queue::enqueue_keyed;

/// What intake asks of the rest of the gateway: the facts routing needs, the questions
/// waiting in a chat, the commands, and answers in the chat.
pub trait IntakePort: RouteFacts + Send + Sync {
    /// Answers the oldest question waiting in session `key` with `decision`; false when none
    /// waits (any more).
    fn answer_question(&self, key: &str, decision: Decision) -> bool;
    /// Whether session `key` is bound to a coding agent (no mention needed in its thread).
    fn is_bound(&self, key: &str) -> bool;
    /// Answers `inbound` (a command) with `text`, privately for a native command.
    fn answer<'a>(&'a self, inbound: &'a Inbound, text: &'a str) -> BoxFuture<'a, ()>;
    /// Says `text` in `to` outside any run.
    fn say<'a>(&'a self, to: &'a Conversation, text: &'a str) -> BoxFuture<'a, ()>;
    /// Answers a press on a button the bot sent (a question's answer).
    fn press(self: Arc<Self>, press: Press) -> BoxFuture<'static, ()>;
    /// A stranger was given pairing code `code` by `inbound` (`new`: just issued, else
    /// repeated): the message is held to be answered once they are approved, and a new
    /// request asked in the owners' DMs (on a task of its own: this returns at once, so the
    /// stranger's messages are held in the order they came). By default nothing.
    fn pairing_asked(
        self: Arc<Self>,
        inbound: Inbound,
        code: String,
        new: bool,
    ) -> BoxFuture<'static, ()> {
        let _ = (inbound, code, new);
        Box::pin(async {})
    }
    /// Runs chat command `command` from `inbound` for session `key` and answers it; returns
    /// a message to run next (the text after `/new`).
    fn run_command(
        self: Arc<Self>,
        key: String,
        inbound: Inbound,
        command: Command,
    ) -> BoxFuture<'static, Option<Inbound>>;
}

/// The intake stage's state and handles.
pub struct Intake {
    config: Arc<Config>,
    store: Store,
    lanes: Lanes,
    placement: Arc<dyn Placement>,
    /// Command tasks in flight (the gateway awaits them at shutdown).
    tasks: TaskTracker,
    /// Recent unmentioned group messages (context for the next mentioned turn).
    history: GroupContext,
    /// Strangers told to try pairing later, and when.
    pairing_notices: pairing_prompt::Notices,
    /// The rest of the gateway (weak: it holds this stage).
    port: Weak<dyn IntakePort>,
}

/// What [`Intake::new`] takes.
pub struct IntakeParts {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The store.
    pub store: Store,
    /// The session lanes.
    pub lanes: Lanes,
    /// Where sessions run.
    pub placement: Arc<dyn Placement>,
    /// Where command tasks run.
    pub tasks: TaskTracker,
    /// Where group context is kept.
    pub history: GroupContext,
    /// The rest of the gateway.
    pub port: Weak<dyn IntakePort>,
}

impl Intake {
    /// The stage over `parts`.
    pub fn new(parts: IntakeParts) -> Intake {
        Intake {
            config: parts.config,
            store: parts.store,
            lanes: parts.lanes,
            placement: parts.placement,
            tasks: parts.tasks,
            history: parts.history,
            pairing_notices: pairing_prompt::Notices::default(),
            port: parts.port,
        }
    }

    /// The session key of an inbound message (SPEC 1.2).
    pub fn session_key(&self, inbound: &Inbound) -> String {
        session_key_of(&self.config, inbound)
    }

    /// The rest of the gateway, while it runs.
    fn port(&self) -> Result<Arc<dyn IntakePort>, SinkError> {
        self.port
            .upgrade()
            .ok_or_else(|| SinkError("the gateway is shutting down".into()))
    }
}

/// The session key of `inbound` under `config` (SPEC 1.2).
pub fn session_key_of(config: &Config, inbound: &Inbound) -> String {
    crate::domain::session_key::build(
        config.agent_id_for(&inbound.conversation, &inbound.sender.id),
        &inbound.conversation,
        &inbound.sender.id,
        config.session.dm_scope,
        &config.session.identity_links,
    )
    .to_string()
}

/// Whether `sender_id` owns the bot on `channel` under `config`: listed in
/// `owner_allow_from`, or, only while that list is empty, made owner by the first pairing
/// (recorded in `store`).
pub fn is_owner(config: &Config, store: &Store, channel: &str, sender_id: &str) -> bool {
    let commands = &config.commands;
    let id = format!("{channel}:{sender_id}");
    commands.owner_allow_from.contains(&id)
        || (commands.pairing_makes_owners()
            && store.is_paired_owner(channel, sender_id).unwrap_or(false))
}

/// The session `chela agent`, the RPC's `agent` and `chela cron add` use under `config`
/// when none is named: the terminal user's direct session.
pub fn default_session_key(config: &Config) -> String {
    let user = config.terminal.resolved_user();
    let conversation = chela_channel::Conversation {
        channel: "terminal".into(),
        account: "default".into(),
        kind: chela_channel::ChatKind::Direct,
        chat_id: user.clone(),
        thread_id: None,
    };
    crate::domain::session_key::build(
        config.agent_id_for(&conversation, &user),
        &conversation,
        &user,
        config.session.dm_scope,
        &config.session.identity_links,
    )
    .to_string()
}

/// The admission rules of a platform channel under `config`; `None` for the local terminal.
pub fn access_for(config: &Config, channel: &str) -> Option<AccessConfig> {
    config.channels.access(channel)
}

/// The [`InboundSink`] every channel feeds.
#[derive(Clone)]
pub struct Router {
    intake: Arc<Intake>,
    /// The session every message goes to (`chela chat --session`), instead of its own.
    session: Option<String>,
}

impl Router {
    /// A router over the intake stage.
    pub fn new(intake: Arc<Intake>) -> Self {
        Router {
            intake,
            session: None,
        }
    }

    /// A router that puts every message in session `key` (`chela chat --session KEY`).
    pub fn for_session(intake: Arc<Intake>, key: String) -> Self {
        Router {
            intake,
            session: Some(key),
        }
    }

    /// Accepts `inbound` for an explicit session key (as `chela agent --session` does).
    /// Returns false when the message was a duplicate or an ignored command.
    pub async fn accept_for(&self, key: String, inbound: Inbound) -> Result<bool, SinkError> {
        let accepted = self.accept_tracked(key, inbound).await?;
        Ok(accepted != Accepted::Ignored)
    }

    /// Like [`Router::accept_for`], saying what became of the message: a queued turn's
    /// durable seq names the run that will answer it (see [`crate::domain::run::run_id_for`]).
    pub async fn accept_tracked(
        &self,
        key: String,
        inbound: Inbound,
    ) -> Result<Accepted, SinkError> {
        let (order, durable) = (carry::Order::Free, queue::Durable::Now);
        carry::route_and_take(&self.intake, key, inbound, order, durable).await
    }

    /// Admits and routes one channel message; whether it was admitted (and not ignored).
    async fn take(
        &self,
        inbound: Inbound,
        order: carry::Order,
        durable: queue::Durable,
    ) -> Result<bool, SinkError> {
        let key = match &self.session {
            Some(key) => key.clone(),
            None => self.intake.session_key(&inbound),
        };
        if crate::domain::text::is_blank(&inbound.text) && inbound.attachments.is_empty() {
            tracing::debug!(session = %key, "blank message dropped");
            return Ok(false);
        }
        match admit::admit(&self.intake, &key, inbound).await? {
            // Admitted: whatever became of it (a duplicate of one taken before included).
            Some(inbound) => carry::route_and_take(&self.intake, key, inbound, order, durable)
                .await
                .map(|_| true),
            None => Ok(false),
        }
    }
}

impl InboundSink for Router {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        let taken = self.take(inbound, carry::Order::Free, queue::Durable::Now);
        Box::pin(async move { taken.await.map(drop) })
    }

    fn accept_admitted(&self, inbound: Inbound) -> BoxFuture<'_, Result<bool, SinkError>> {
        Box::pin(self.take(inbound, carry::Order::Free, queue::Durable::Now))
    }

    fn accept_in_order(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        let taken = self.take(inbound, carry::Order::Input, queue::Durable::Now);
        Box::pin(async move { taken.await.map(drop) })
    }

    fn accept_before_cursor(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        let taken = self.take(inbound, carry::Order::Free, queue::Durable::WithCursor);
        Box::pin(async move { taken.await.map(drop) })
    }

    fn press(&self, press: Press) -> BoxFuture<'_, ()> {
        // Answered on a task of its own, like a command: the channel's receive loop goes on.
        if let Ok(port) = self.intake.port() {
            self.intake.tasks.spawn(port.press(press));
        }
        Box::pin(async {})
    }

    fn cursor<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<i64>> {
        Box::pin(async move { self.intake.store.get_cursor(name).ok().flatten() })
    }

    fn cursors<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Vec<(String, i64)>> {
        Box::pin(async move {
            self.intake
                .store
                .cursors_starting(prefix)
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot read cursors");
                    Vec::new()
                })
        })
    }

    fn save_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move { queue::sink_result(self.intake.store.set_cursor(name, value).await) })
    }

    fn raise_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(
            async move { queue::sink_result(self.intake.store.raise_cursor(name, value).await) },
        )
    }
}
