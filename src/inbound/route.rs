//! Routing of normalized inbound messages: dedupe -> command fast path -> session key ->
//! durable pending queue -> lane.

use std::sync::Arc;

use chela_channel::{BoxFuture, ChatKind, Inbound, InboundSink, SinkError};

use crate::gateway::Core;
use crate::inbound::admission::{self, SenderFacts, Verdict};
use crate::inbound::commands;
use crate::lane::QueuedTurn;
use crate::store::PairingOutcome;
use crate::store::PendingTurn;

/// The sender id of messages chela itself puts into a session (a sub-agent's task or
/// result, a spawned thread's first message); they have no platform message to quote.
pub const SYSTEM_SENDER: &str = "chela";

/// The private answer to a native command its sender may not run (it must not go unanswered).
const NOT_ALLOWED: &str = "Not allowed.";

/// The [`InboundSink`] every channel feeds.
#[derive(Clone)]
pub struct Router {
    core: Arc<Core>,
}

impl Router {
    /// A router over the gateway's core.
    pub fn new(core: Arc<Core>) -> Self {
        Router { core }
    }

    /// Accepts `inbound` for an explicit session key (as `chela agent --session` does).
    /// Returns false when the message was a duplicate or an ignored command.
    pub async fn accept_for(&self, key: String, inbound: Inbound) -> Result<bool, SinkError> {
        let accepted = self.accept_tracked(key, inbound).await?;
        Ok(accepted != Accepted::Ignored)
    }

    /// Like [`Router::accept_for`], saying what became of the message: a queued turn's
    /// durable seq names the run that will answer it (see
    /// [`crate::gateway::runner::run_id_for`]).
    pub async fn accept_tracked(
        &self,
        key: String,
        inbound: Inbound,
    ) -> Result<Accepted, SinkError> {
        let core = &self.core;
        let dedupe = crate::store::dedupe_key(&inbound);
        if answers_question(core, &key, &inbound) {
            return Ok(Accepted::Command);
        }
        let command = match commands::parse(&inbound.text, None) {
            Some(command) if may_run_admin_command(core, &inbound, &command).await => Some(command),
            Some(_) if inbound.text.trim_start().starts_with('/') => {
                // An unauthorized command sent alone is ignored; a native one is refused
                // privately, or the platform would show it as unanswered.
                tracing::info!(sender = %inbound.sender.id, "command needs an owner or group admin; ignored");
                if inbound.interaction.is_some() {
                    core.answer(&inbound, NOT_ALLOWED).await;
                }
                return Ok(Accepted::Ignored);
            }
            _ => None,
        };
        if command.is_none() && inbound.interaction.is_some() {
            // A native command the core does not handle (yet): never a turn for the model.
            let name = inbound.text.split_whitespace().next().unwrap_or("/");
            core.answer(&inbound, &format!("{name} is not available yet."))
                .await;
            return Ok(Accepted::Ignored);
        }
        if let Some(command) = command {
            let fresh = core
                .store
                .mark_seen(&dedupe, inbound.timestamp_ms)
                .map_err(|e| SinkError(e.to_string()))?;
            if fresh {
                let core = core.clone();
                core.tasks.clone().spawn(async move {
                    let first =
                        crate::gateway::commands::handle(&core, &key, &inbound, command).await;
                    if let Some(first) = first
                        && let Err(e) = enqueue(&core, key, first).await
                    {
                        core.say(
                            &inbound.conversation,
                            &format!("Cannot queue your message: {e}"),
                        )
                        .await;
                    }
                });
            } else {
                tracing::debug!(session = %key, "duplicate command dropped");
            }
            return Ok(if fresh {
                Accepted::Command
            } else {
                Accepted::Ignored
            });
        }
        Ok(match enqueue(core, key, inbound).await? {
            Some(seq) => Accepted::Queued(seq),
            None => Accepted::Ignored,
        })
    }
}

/// What [`Router::accept_tracked`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Queued durably for a run, under this pending seq.
    Queued(u64),
    /// Handled on the command fast path (or as the answer to a waiting question).
    Command,
    /// Dropped: a duplicate, or a command its sender may not run.
    Ignored,
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
            if conv.kind != ChatKind::Direct
                && !slash_command
                && let Ok(mut history) = core.history.lock()
            {
                let framed = history.frame(key, &inbound.text);
                if framed != inbound.text {
                    forget_history(core, key);
                }
                inbound.text = framed;
            }
            Some(inbound)
        }
        Verdict::History => {
            tracing::debug!(session = %key, sender = %sender.id, "unmentioned group message kept as context");
            if let Ok(mut history) = core.history.lock() {
                let name = if sender.name.is_empty() {
                    &sender.id
                } else {
                    &sender.name
                };
                if let Some(forgotten) = history.remember(key, name, &inbound.text) {
                    forget_history(core, &forgotten);
                }
                // Written through, so a restart keeps the context (the channel's cursor
                // moves past this message once it returns).
                if let Err(e) = core.store.save_group_history(key, &history.lines(key)) {
                    tracing::warn!(error = %e, session = %key, "cannot save group history");
                }
            }
            None
        }
        Verdict::Pair => {
            let outcome = core.store.request_pairing(
                &conv.channel,
                &conv.account,
                &sender.id,
                &sender.name,
                crate::agent::message::now_ms(),
            );
            match outcome {
                Ok(PairingOutcome::New(code) | PairingOutcome::Existing(code)) => {
                    tracing::info!(channel = %conv.channel, sender = %sender.id, "pairing code issued");
                    let text = format!(
                        "This bot is private. Ask its owner to approve you with:\n\n    chela pairing approve {} {code}\n\nThe code is valid for one hour.",
                        conv.channel
                    );
                    core.answer(&inbound, &text).await;
                }
                Ok(PairingOutcome::TooMany) => {
                    tracing::info!(channel = %conv.channel, sender = %sender.id, "pairing refused: too many pending codes");
                    if inbound.interaction.is_some() {
                        core.answer(&inbound, NOT_ALLOWED).await;
                    }
                }
                Err(e) => tracing::error!(error = %e, "cannot issue a pairing code"),
            }
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

/// Takes `inbound` as the answer to an open permission question of session `key` when it is
/// one (`allow` / `deny` from an owner or the binding's owner).
fn answers_question(core: &Arc<Core>, key: &str, inbound: &Inbound) -> bool {
    if !core.questions.is_waiting(key) {
        return false;
    }
    let Some(decision) = crate::gateway::ask::parse_answer(&inbound.text) else {
        return false;
    };
    let conv = &inbound.conversation;
    let who = format!("{}:{}", conv.channel, inbound.sender.id);
    let allowed = conv.channel == "terminal"
        || core.is_owner(&conv.channel, &inbound.sender.id)
        || core.acp.binding(key).is_some_and(|b| b.owner == who);
    if !allowed {
        return false;
    }
    core.questions.answer(key, decision)
}

/// Whether `command` may run for this sender: `commands.allow_from` first, then the owner and
/// group-admin rules of the commands that need them.
async fn may_run_admin_command(
    core: &Arc<Core>,
    inbound: &Inbound,
    command: &commands::Command,
) -> bool {
    let conv = &inbound.conversation;
    if !commands_allowed(core, conv, &inbound.sender.id) {
        return false;
    }
    if matches!(
        command,
        commands::Command::Acp(_) | commands::Command::Session(_) | commands::Command::Approve(_)
    ) {
        // Coding agents and approved commands run code: owners only (the local terminal
        // user is one).
        return conv.channel == "terminal" || core.is_owner(&conv.channel, &inbound.sender.id);
    }
    let admin_only = match command {
        commands::Command::New(_) | commands::Command::Reset { .. } | commands::Command::Stop => {
            true
        }
        // Seeing the model is for everyone; changing a group's model is not.
        commands::Command::Model(args) => !args.trim().is_empty(),
        _ => false,
    };
    if !admin_only
        || conv.kind == ChatKind::Direct
        || core.is_owner(&conv.channel, &inbound.sender.id)
    {
        return true;
    }
    match core.channel(&conv.channel) {
        Some(channel) => channel
            .is_admin(conv, &inbound.sender.id)
            .await
            .unwrap_or(false),
        None => false,
    }
}

/// Drops the saved group history of `key` (it was framed into a turn, or made room).
fn forget_history(core: &Core, key: &str) {
    if let Err(e) = core.store.clear_group_history(key) {
        tracing::warn!(error = %e, session = %key, "cannot clear group history");
    }
}

/// `commands.allow_from`, when set, is the only source of commands (SPEC 2); the local
/// terminal and the RPC are not limited by it.
fn commands_allowed(core: &Core, conv: &chela_channel::Conversation, sender_id: &str) -> bool {
    let allow = &core.config.commands.allow_from;
    allow.is_empty()
        || conv.channel == "terminal"
        || conv.channel == crate::rpc::channel::NAME
        || allow
            .iter()
            .any(|a| a == "*" || *a == format!("{}:{sender_id}", conv.channel))
}

/// Durably queues an ordinary message and hands it to its lane; its pending seq, or `None`
/// for a duplicate.
async fn enqueue(
    core: &Arc<Core>,
    key: String,
    inbound: Inbound,
) -> Result<Option<u64>, SinkError> {
    let dedupe = crate::store::dedupe_key(&inbound);
    {
        let pending = PendingTurn {
            session_key: key.clone(),
            inbound,
            queued_ms: crate::agent::message::now_ms(),
        };
        let Some(seq) = core
            .store
            .enqueue_unique(&dedupe, &pending)
            .await
            .map_err(|e| SinkError(e.to_string()))?
        else {
            tracing::debug!(session = %key, "duplicate inbound dropped");
            return Ok(None);
        };
        core.lanes
            .submit(&key, queued_turn(seq, &pending))
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        Ok(Some(seq))
    }
}

impl InboundSink for Router {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            let key = self.core.session_key(&inbound);
            if commands::is_blank(&inbound.text) {
                tracing::debug!(session = %key, "blank message dropped");
                return Ok(());
            }
            match admit(&self.core, &key, inbound).await {
                Some(inbound) => self.accept_for(key, inbound).await.map(|_| ()),
                None => Ok(()),
            }
        })
    }

    fn cursor<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Option<i64>> {
        Box::pin(async move { self.core.store.get_cursor(name).ok().flatten() })
    }

    fn save_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            self.core
                .store
                .set_cursor(name, value)
                .await
                .map_err(|e| SinkError(e.to_string()))
        })
    }
}

/// The lane turn for a durable pending entry.
pub fn queued_turn(seq: u64, pending: &PendingTurn) -> QueuedTurn {
    let inbound = &pending.inbound;
    let conv = &inbound.conversation;
    QueuedTurn {
        seqs: vec![seq],
        text: inbound.text.clone(),
        sender: if inbound.sender.name.is_empty() {
            inbound.sender.id.clone()
        } else {
            inbound.sender.name.clone()
        },
        // Collect merges only within one reply target (and, once admission has roles, one
        // authorization level).
        context: format!(
            "{}|{}|{}|{}",
            conv.channel,
            conv.account,
            conv.chat_id,
            conv.thread_id.as_deref().unwrap_or("")
        ),
        // In groups the reply quotes the message it answers (chela's own have none).
        quote: (conv.kind != ChatKind::Direct && inbound.sender.id != SYSTEM_SENDER)
            .then(|| inbound.message_id.clone()),
        target: conv.clone(),
    }
}
