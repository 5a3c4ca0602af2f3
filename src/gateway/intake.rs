//! Intake: carries out the router's decisions. Every channel's messages (and the RPC's, and
//! `chela agent`'s) come here: admission, then [`route`] decides, then a command runs on the
//! fast path, an answer reaches its question, or the message is queued durably for its lane.
//! On several nodes (`[cluster] enabled`) a message is queued as it is after admission, and
//! the node running its session routes it ([`route_queued`]).

use std::sync::Arc;

use chela_channel::{BoxFuture, ChatKind, Conversation, Inbound, InboundSink, SinkError};

use super::Core;
use crate::cluster::Cluster;
use crate::inbound::admission::{self, SenderFacts, Verdict};
use crate::inbound::commands;
use crate::inbound::route::{self, Accepted, Route, RouteFacts, queued_turn};
use crate::store::PendingTurn;

/// The private answer to a native command its sender may not run (it must not go unanswered).
const NOT_ALLOWED: &str = "Not allowed.";

/// The [`InboundSink`] every channel feeds.
#[derive(Clone)]
pub struct Router {
    core: Arc<Core>,
    /// The session every message goes to (`chela chat --session`), instead of its own.
    session: Option<String>,
}

impl Router {
    /// A router over the gateway's core.
    pub fn new(core: Arc<Core>) -> Self {
        Router {
            core,
            session: None,
        }
    }

    /// A router that puts every message in session `key` (`chela chat --session KEY`).
    pub fn for_session(core: Arc<Core>, key: String) -> Self {
        Router {
            core,
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
        self.route_and_take(key, inbound, Order::Free).await
    }

    /// Routes `inbound` and carries the route out; with [`Order::Input`] a command is
    /// answered before this returns. On several nodes most messages are only queued here
    /// (see [`routed_where_it_runs`]).
    async fn route_and_take(
        &self,
        key: String,
        inbound: Inbound,
        order: Order,
    ) -> Result<Accepted, SinkError> {
        let core = &self.core;
        if core.placement.routes_where_it_runs() && routed_where_it_runs(&inbound) {
            // Several nodes: the node that runs the session routes the message and carries
            // it out ([`route_queued`]); its commands and answers act there.
            return Ok(match enqueue(core, key, inbound).await? {
                Some(seq) => Accepted::Queued(seq),
                None => Accepted::Ignored,
            });
        }
        let route = route::route(&key, &inbound, core.as_ref()).await;
        match carry_out(core, key, inbound, route, order, Once::Check).await? {
            Carried::Done(accepted) => Ok(accepted),
            Carried::Turn(key, inbound) => Ok(match enqueue(core, key, *inbound).await? {
                Some(seq) => Accepted::Queued(seq),
                None => Accepted::Ignored,
            }),
        }
    }
}

/// What carrying a route out left to do.
enum Carried {
    /// Nothing more: it was answered, refused or handed to a command.
    Done(Accepted),
    /// Run it as a turn of session `.0`.
    Turn(String, Box<Inbound>),
}

/// Whether a message must still be marked seen before it acts (a command is answered once),
/// or came through the pending queue under this seq (marked when it was accepted; the
/// queue entry goes once it is carried out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Once {
    Check,
    Queued(u64),
}

/// Carries out `route` for `inbound` in session `key`, except running it as a turn.
async fn carry_out(
    core: &Arc<Core>,
    key: String,
    inbound: Inbound,
    route: Route,
    order: Order,
    once: Once,
) -> Result<Carried, SinkError> {
    let done = match route {
        Route::Answer(decision) if core.questions.answer_oldest(&key, decision) => {
            Accepted::Command
        }
        Route::Command(command) => run_command(core, key, inbound, command, order, once).await?,
        Route::Refused { native, why } => {
            tracing::info!(sender = %inbound.sender.id, ?why, "command refused");
            if native {
                core.answer(&inbound, NOT_ALLOWED).await;
            } else if inbound.conversation.kind == ChatKind::Direct
                && first_time(core, &inbound, once)?
            {
                // In a direct chat the sender is told why; a group stays quiet.
                let command = inbound.text.split_whitespace().next().unwrap_or("/");
                let who = format!("{}:{}", inbound.conversation.channel, inbound.sender.id);
                core.answer(&inbound, &why.explain(&commands::excerpt(command), &who))
                    .await;
            }
            Accepted::Ignored
        }
        Route::Unknown(name) => {
            if first_time(core, &inbound, once)? {
                core.answer(&inbound, &commands::unknown_answer(&name))
                    .await;
            }
            Accepted::Command
        }
        Route::Unsupported(name) => {
            core.answer(&inbound, &format!("{name} is not available yet."))
                .await;
            Accepted::Ignored
        }
        // The question was answered or withdrawn meanwhile: an ordinary message then.
        Route::Answer(_) | Route::Turn => return Ok(Carried::Turn(key, Box::new(inbound))),
    };
    Ok(Carried::Done(done))
}

/// On several nodes, whether `inbound` is routed by the node that runs its session: every
/// message but the RPC's (its answers go to this node's RPC clients) and native commands
/// (an interaction is answered with a token only this node holds, never stored).
fn routed_where_it_runs(inbound: &Inbound) -> bool {
    inbound.interaction.is_none() && inbound.conversation.channel != route::RPC_CHANNEL
}

/// On a node of several (`[cluster] enabled`), carries out a message queued for a session
/// this node runs, as intake does on a single node: an ordinary message goes to its lane,
/// the answer to a question reaches it, and a command (or a refusal, or an unknown command
/// answered) runs here, where the session's lane and questions are (a `/stop` sent through
/// another node stops the run here). A command runs in a task of its own and holds its
/// session meanwhile: the session's later messages wait for it ([`Cluster::hold`]), as they
/// would come after it on a single node. Its pending entry goes once it finished (a node
/// dying on the way leaves it to the next owner).
pub(super) async fn route_queued(
    core: &Arc<Core>,
    cluster: &Arc<Cluster>,
    seq: u64,
    turn: &PendingTurn,
) {
    let key = turn.session_key.clone();
    let route = route::route(&key, &turn.inbound, core.as_ref()).await;
    let route = match route {
        Route::Answer(decision) if core.questions.answer_oldest(&key, decision) => {
            settle_queued(core, seq);
            return;
        }
        Route::Answer(_) | Route::Turn => {
            if let Err(e) = core.lanes.submit(&key, queued_turn(seq, turn)).await {
                tracing::error!(error = %e, "cluster: cannot hand a turn to its lane");
            }
            return;
        }
        route => route,
    };
    let held = HeldCommand {
        core: core.clone(),
        cluster: cluster.clone(),
        key: cluster.hold(&key),
        seq,
    };
    let inbound = turn.inbound.clone();
    core.tasks.spawn(async move {
        let core = held.core.clone();
        let once = Once::Queued(seq);
        if let Err(e) = carry_out(&core, key.clone(), inbound, route, Order::Free, once).await {
            tracing::error!(error = %e, session = %key, "cluster: cannot carry out a command");
        }
        drop(held);
    });
}

/// A queued command being carried out: when it ends (or its task is dropped), its pending
/// entry goes and its session's later messages may run.
struct HeldCommand {
    core: Arc<Core>,
    cluster: Arc<Cluster>,
    key: String,
    seq: u64,
}

impl Drop for HeldCommand {
    fn drop(&mut self) {
        settle_queued(&self.core, self.seq);
        self.cluster.release(&self.key);
    }
}

/// Removes the pending entry `seq` of a message carried out without a run.
fn settle_queued(core: &Core, seq: u64) {
    if let Err(e) = core.store.remove_pending(seq) {
        tracing::warn!(error = %e, seq, "cannot remove a carried-out message from the queue");
    }
}

/// How a message's handling is ordered with the ones after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// A chat: a command runs at once, beside the session's queue (it may overtake turns).
    Free,
    /// A sequential input (a piped script): a command is answered before the next line is
    /// read, and one that changes what later turns do waits for the earlier turns first.
    Input,
}

/// Whether `command` changes what the session's turns do (its model, queue, window), so
/// that from a sequential input it must apply only after the turns before it have run.
fn acts_on_later_turns(command: &commands::Command) -> bool {
    use commands::Command as C;
    matches!(
        command,
        C::Model(_) | C::Queue(_) | C::New(_) | C::Reset { .. } | C::Compact
    )
}

/// Runs `command` on the fast path (once: a command has its own dedupe mark); with
/// [`Order::Input`], or when it came through the queue ([`Once::Queued`]: the caller's task
/// holds its session), waits until it has answered.
async fn run_command(
    core: &Arc<Core>,
    key: String,
    inbound: Inbound,
    command: commands::Command,
    order: Order,
    once: Once,
) -> Result<Accepted, SinkError> {
    if !first_time(core, &inbound, once)? {
        tracing::debug!(session = %key, "duplicate command dropped");
        return Ok(Accepted::Ignored);
    }
    let core = core.clone();
    let in_order = order == Order::Input;
    let task = core.tasks.clone().spawn(async move {
        if in_order && acts_on_later_turns(&command) {
            // The lines before it are in the lane: let them run first.
            let _ = core.lanes.wait_idle(&key).await;
        }
        let commands = super::command_context::CoreCommands(core.clone());
        let first = crate::commands::handle(&commands, &key, &inbound, command).await;
        // The turn a command leaves (`/new <text>`) was counted with the command.
        if let Some(first) = first
            && let Err(e) = enqueue_counted(&core, key, first, false).await
        {
            core.say(
                &inbound.conversation,
                &format!("Cannot queue your message: {e}"),
            )
            .await;
        }
    });
    if in_order || once != Once::Check {
        let _ = task.await;
    }
    Ok(Accepted::Command)
}

/// Marks `inbound` seen; false when it was seen before (a command is answered once). A
/// message from the queue was marked when it was accepted: it is new.
fn first_time(core: &Core, inbound: &Inbound, once: Once) -> Result<bool, SinkError> {
    if let Once::Queued(_) = once {
        return Ok(true);
    }
    let dedupe = crate::store::dedupe_key(inbound);
    let new = core
        .store
        .mark_seen(&dedupe, inbound.timestamp_ms)
        .map_err(|e| SinkError(e.to_string()))?;
    if new {
        crate::metrics::global().inbound(&inbound.conversation.channel);
    }
    Ok(new)
}

impl RouteFacts for Core {
    fn question_waiting(&self, key: &str) -> bool {
        self.questions.is_waiting(key)
    }

    fn is_owner(&self, channel: &str, sender_id: &str) -> bool {
        Core::is_owner(self, channel, sender_id)
    }

    fn binding_owner(&self, key: &str) -> Option<String> {
        self.acp.binding(key).map(|b| b.owner)
    }

    fn is_skill(&self, key: &str, name: &str) -> bool {
        let skills = &self.agents.for_key(key).skill_names;
        skills.iter().any(|skill| skill.eq_ignore_ascii_case(name))
    }

    fn others_choose_models(&self) -> bool {
        let config = &self.config;
        config.commands.model.open_to_others(&config.model.models)
    }

    fn command_allow_from(&self) -> &[String] {
        &self.config.commands.allow_from
    }

    fn is_group_admin<'a>(
        &'a self,
        conv: &'a Conversation,
        sender_id: &'a str,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match self.channel(&conv.channel) {
                Some(channel) => channel.is_admin(conv, sender_id).await.unwrap_or(false),
                None => false,
            }
        })
    }
}

/// Applies the channel's admission rules; returns the message to route (group context
/// framed in), or `None` when it was answered with a pairing prompt, kept as history or
/// dropped.
async fn admit(core: &Arc<Core>, key: &str, mut inbound: Inbound) -> Option<Inbound> {
    let conv = &inbound.conversation;
    let Some(access) = core.access_for(&conv.channel) else {
        return Some(inbound);
    };
    let sender = &inbound.sender;
    let facts = SenderFacts {
        paired: core
            .store
            .is_paired(&conv.channel, &conv.account, &sender.id)
            .unwrap_or(false),
        owner: core.is_owner(&conv.channel, &sender.id),
    };
    let slash_command = inbound.text.trim_start().starts_with('/')
        && commands::parse(&inbound.text, None).is_some();
    if slash_command {
        // A slash command is addressed to the bot even without a mention (the adapter drops
        // commands addressed to other bots); plain-text stop words are not.
        inbound.mentioned = true;
    }
    if core.acp.binding(key).is_some() {
        // A thread bound to a coding agent is a conversation with it: no mention needed.
        inbound.mentioned = true;
    }
    match admission::decide(&access, &inbound, facts) {
        Verdict::Admit => {
            // Framed with group context a command would no longer parse: the context waits
            // for the next turn.
            if conv.kind != ChatKind::Direct && !slash_command {
                inbound.text = core.history.frame(&core.store, key, &inbound.text);
            }
            Some(inbound)
        }
        Verdict::History => {
            tracing::debug!(session = %key, sender = %sender.id, "unmentioned group message kept as context");
            core.history.keep(&core.store, key, &inbound);
            None
        }
        Verdict::Pair => {
            super::pairing_prompt::answer_stranger(core, &inbound).await;
            None
        }
        Verdict::Drop(reason) => {
            tracing::info!(channel = %conv.channel, chat = %conv.chat_id, sender = %sender.id, reason, "inbound dropped by admission");
            if inbound.interaction.is_some() {
                core.answer(&inbound, NOT_ALLOWED).await;
            }
            None
        }
    }
}

/// Durably queues a message and (on a single node) hands it to its lane; its pending seq,
/// or `None` for a duplicate.
async fn enqueue(
    core: &Arc<Core>,
    key: String,
    inbound: Inbound,
) -> Result<Option<u64>, SinkError> {
    enqueue_counted(core, key, inbound, true).await
}

/// [`enqueue`], counting a new message in the inbound metric when `count`.
async fn enqueue_counted(
    core: &Arc<Core>,
    key: String,
    inbound: Inbound,
    count: bool,
) -> Result<Option<u64>, SinkError> {
    let dedupe = crate::store::dedupe_key(&inbound);
    let channel = inbound.conversation.channel.clone();
    let pending = PendingTurn {
        session_key: key,
        inbound,
        queued_ms: crate::domain::message::now_ms(),
    };
    let queued = enqueue_keyed(core, pending, &dedupe).await?;
    if count && queued.is_some() {
        // Counted once it is known to be new: a redelivery is not a second message.
        crate::metrics::global().inbound(&channel);
    }
    Ok(queued)
}

/// Durably queues `pending` unless `dedupe` was queued before, and hands it to its lane (on
/// a cluster, the partition's holder reads it from the queue); its seq, or `None` for a
/// duplicate. Scheduled turns come here with their own key (`cron::run_key`).
pub(super) async fn enqueue_keyed(
    core: &Arc<Core>,
    pending: PendingTurn,
    dedupe: &str,
) -> Result<Option<u64>, SinkError> {
    let key = pending.session_key.clone();
    let Some(seq) = core
        .store
        .enqueue_unique(dedupe, &pending)
        .await
        .map_err(|e| SinkError(e.to_string()))?
    else {
        tracing::debug!(session = %key, "duplicate inbound dropped");
        return Ok(None);
    };
    core.placement
        .hand_over(&key, queued_turn(seq, &pending))
        .await
        .map_err(|e| SinkError(e.to_string()))?;
    Ok(Some(seq))
}

impl Router {
    /// Admits and routes one channel message.
    async fn take(&self, inbound: Inbound, order: Order) -> Result<(), SinkError> {
        let key = match &self.session {
            Some(key) => key.clone(),
            None => self.core.session_key(&inbound),
        };
        if crate::domain::text::is_blank(&inbound.text) && inbound.attachments.is_empty() {
            tracing::debug!(session = %key, "blank message dropped");
            return Ok(());
        }
        match admit(&self.core, &key, inbound).await {
            Some(inbound) => self.route_and_take(key, inbound, order).await.map(|_| ()),
            None => Ok(()),
        }
    }
}

impl InboundSink for Router {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(self.take(inbound, Order::Free))
    }

    fn accept_in_order(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(self.take(inbound, Order::Input))
    }

    fn cursor<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<i64>> {
        Box::pin(async move { self.core.store.get_cursor(name).ok().flatten() })
    }

    fn cursors<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Vec<(String, i64)>> {
        Box::pin(async move {
            self.core
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
        Box::pin(async move { sink_result(self.core.store.set_cursor(name, value).await) })
    }

    fn raise_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move { sink_result(self.core.store.raise_cursor(name, value).await) })
    }
}

/// A store write's result, as the sink reports it.
fn sink_result(result: Result<(), crate::store::StoreError>) -> Result<(), SinkError> {
    result.map_err(|e| SinkError(e.to_string()))
}
