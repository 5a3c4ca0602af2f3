//! The gateway's side of the `message` tool's actions (docs/tools.md): react, edit, delete,
//! pin, poll, in the conversation a send would go to (the run's own, or that of a session it
//! reaches: `sessions.rs` resolves it). Editing and deleting take only messages the agent
//! sent there (`own.rs`); reacting and pinning any message, by default the one the run
//! answers.

use chela_channel::{ChannelError, Conversation, SentMessage};

use super::Handles;
use super::own::{self, OwnKind};
use crate::agent::tools::message_action::MessageAction;
use crate::agent::tools::refusal::ToolRefusal;
use crate::agent::tools::sessions::Caller;

/// Where an action happens: session `key`'s conversation `to`, for the run `run_id`.
pub(super) struct Place<'a> {
    /// The session.
    pub(super) key: &'a str,
    /// Its conversation.
    pub(super) to: Conversation,
    /// The acting run (empty outside the gateway's runs).
    pub(super) run_id: &'a str,
    /// The acting run's session: it edits and deletes only what its own runs sent.
    pub(super) sender: &'a str,
}

/// Carries out `action` at `at`; `answered` is the message the run answers, with its
/// conversation, if any ([`answered_message`]).
pub(super) async fn act(
    host: &Handles,
    at: Place<'_>,
    answered: Option<(Conversation, String)>,
    action: MessageAction,
) -> Result<String, ToolRefusal> {
    let Place {
        key,
        to,
        run_id,
        sender,
    } = at;
    let channel = host
        .notices
        .channel(&to.channel)
        .ok_or_else(|| ToolRefusal::Failed(format!("the {} channel is not running", to.channel)))?;
    let word = action.word();
    let failed = |e: ChannelError| refusal(word, &to, e);
    match action {
        MessageAction::React { message_id, emoji } => {
            let id = chosen(message_id, answered, &to, word)?;
            channel.react(&to, &id, &emoji).await.map_err(failed)?;
            Ok(format!("reacted {emoji} to message {id}"))
        }
        MessageAction::Pin { message_id } => {
            let id = chosen(message_id, answered, &to, word)?;
            channel.pin(&to, &id).await.map_err(failed)?;
            Ok(format!("pinned message {id}"))
        }
        MessageAction::Edit { message_id, text } => {
            if own_message(host, &to, &message_id, word, sender)? == OwnKind::Poll {
                return Err("a poll cannot be edited; delete it and send a new one".into());
            }
            let max = channel.limits().max_chars;
            if text.chars().count() > max {
                let why = format!("the new text is too long for one message (at most {max})");
                return Err(why.into());
            }
            let message = SentMessage { message_id };
            channel.edit(&to, &message, &text).await.map_err(failed)?;
            Ok(format!("edited message {}", message.message_id))
        }
        MessageAction::Delete { message_id } => {
            own_message(host, &to, &message_id, word, sender)?;
            let message = SentMessage { message_id };
            channel.delete(&to, &message).await.map_err(failed)?;
            if let Err(e) = own::forget(&host.store, &to, &message.message_id) {
                tracing::warn!(error = %e, "cannot forget a deleted message");
            }
            Ok(format!("deleted message {}", message.message_id))
        }
        MessageAction::Poll(poll) => {
            host.notices.outbox().settled_within(&to).await;
            // The same poll of the same run goes once (a run again after a crash). Each field
            // is length-prefixed so no two polls share a mark.
            let fields = std::iter::once(&poll.question).chain(&poll.options);
            let what: String = (fields.map(|f| format!("{}:{f}|", f.len())))
                .chain(std::iter::once(format!("multiple:{}", poll.multiple)))
                .collect();
            let mark =
                (!run_id.is_empty()).then(|| crate::delivery::files::send_mark(run_id, &to, &what));
            if let Some(mark) = &mark
                && !host
                    .store
                    .mark_seen(mark, crate::domain::message::now_ms())?
            {
                return Ok(format!("already sent this poll to {key} in this run"));
            }
            let sent = channel.send_poll(&to, &poll).await.map_err(|e| {
                if let Some(mark) = &mark
                    && let Err(e) = host.store.forget_seen(mark)
                {
                    tracing::warn!(error = %e, "could not drop the mark of a failed poll");
                }
                failed(e)
            });
            let id = sent?.message_id;
            note_own(host, &to, &id, OwnKind::Poll, sender);
            let place = format!("{} chat {}", to.channel, to.chat_id);
            Ok(format!("sent a poll to {key} ({place}; message id {id})"))
        }
    }
}

/// Notes message `id` of `to` as the agent's own (a failure is logged: the message went).
fn note_own(host: &Handles, to: &Conversation, id: &str, kind: OwnKind, sender: &str) {
    if let Err(e) = own::note(&host.store, to, &[id.to_owned()], kind, sender) {
        tracing::warn!(error = %e, "cannot note a message the agent sent");
    }
}

/// The message the run of `caller` answers (its first), with its conversation: `None` for a
/// run that answers no chat message (a scheduled one, or one without a durable turn).
pub(super) fn answered_message(host: &Handles, caller: &Caller) -> Option<(Conversation, String)> {
    let seq = crate::domain::run::seq_of_run_id(&caller.run_id)?;
    let turns = host.store.pending_for(&caller.session).ok()?;
    let (_, turn) = turns.into_iter().find(|(s, _)| *s == seq)?;
    let inbound = turn.inbound;
    (inbound.sender.id != crate::inbound::route::SYSTEM_SENDER)
        .then_some((inbound.conversation, inbound.message_id))
}

/// The message an action targets: the one named, else the one the run answers when that is
/// in `to`.
fn chosen(
    named: Option<String>,
    answered: Option<(Conversation, String)>,
    to: &Conversation,
    word: &str,
) -> Result<String, ToolRefusal> {
    named
        .or_else(|| answered.filter(|(c, _)| c == to).map(|(_, id)| id))
        .ok_or_else(|| {
            format!("{word} needs `message_id` here: there is no message this run answers in that conversation").into()
        })
}

/// What message `id` of `to` is, when the agent sent it; a refusal otherwise.
fn own_message(
    host: &Handles,
    to: &Conversation,
    id: &str,
    word: &str,
    sender: &str,
) -> Result<OwnKind, ToolRefusal> {
    own::find(&host.store, to, id, sender)?.ok_or_else(|| {
        ToolRefusal::Refused(format!(
            "message {id} is not one you sent in this conversation: you may {word} only \
             messages this session sent with the message tool (their ids are in its results)"
        ))
    })
}

/// A channel's failure at `word`, as the model reads it.
fn refusal(word: &str, to: &Conversation, error: ChannelError) -> ToolRefusal {
    match error {
        ChannelError::Unsupported(_) => {
            ToolRefusal::Refused(format!("{word} is not supported on {}", to.channel))
        }
        other => ToolRefusal::Failed(format!("{word} failed: {other}")),
    }
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
