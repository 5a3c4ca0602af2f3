//! Admission: a channel's rules applied to a message before it is routed (SPEC 1.3).

use std::sync::Arc;

use chela_channel::{ChatKind, Inbound, SinkError};

use super::{Intake, access_for};
use crate::inbound::admission::{self, SenderFacts, Verdict};
use crate::inbound::commands;

/// Applies the channel's admission rules; returns the message to route (group context
/// framed in), or `None` when it was answered with a pairing prompt, kept as history or
/// dropped.
pub(super) async fn admit(
    intake: &Arc<Intake>,
    key: &str,
    mut inbound: Inbound,
) -> Result<Option<Inbound>, SinkError> {
    let conv = &inbound.conversation;
    let Some(access) = access_for(&intake.config, &conv.channel) else {
        return Ok(Some(inbound));
    };
    let port = intake.port()?;
    let sender = &inbound.sender;
    let facts = SenderFacts {
        paired: intake
            .store
            .is_paired(&conv.channel, &conv.account, &sender.id)
            .unwrap_or(false),
        owner: port.is_owner(&conv.channel, &sender.id),
    };
    let slash_command = inbound.text.trim_start().starts_with('/')
        && commands::parse(&inbound.text, None).is_some();
    if slash_command {
        // A slash command is addressed to the bot even without a mention (the adapter drops
        // commands addressed to other bots); plain-text stop words are not.
        inbound.mentioned = true;
    }
    if port.is_bound(key) {
        // A thread bound to a coding agent is a conversation with it: no mention needed.
        inbound.mentioned = true;
    }
    Ok(match admission::decide(&access, &inbound, facts) {
        Verdict::Admit => {
            // Framed with group context a command would no longer parse: the context waits
            // for the next turn.
            if conv.kind != ChatKind::Direct && !slash_command {
                inbound.text = intake.history.frame(&intake.store, key, &inbound.text);
            }
            Some(inbound)
        }
        Verdict::History => {
            // Why the bot stays silent, once per stretch of such messages (a busy group
            // would fill the log): the rest until the next turn at debug.
            if intake.history.keep(&intake.store, key, &inbound) {
                tracing::info!(session = %key, sender = %sender.id, "unmentioned group message kept as context (not addressed to the bot: no mention, reply or mention pattern, and require_mention = true); later ones until the next turn are logged at debug");
            } else {
                tracing::debug!(session = %key, sender = %sender.id, "unmentioned group message kept as context");
            }
            None
        }
        Verdict::Pair => {
            super::pairing_prompt::answer_stranger(intake, port.as_ref(), &inbound).await;
            None
        }
        Verdict::Drop(reason) => {
            tracing::info!(channel = %conv.channel, chat = %conv.chat_id, sender = %sender.id, reason, "inbound dropped by admission");
            if inbound.interaction.is_some() {
                port.answer(&inbound, super::carry::NOT_ALLOWED).await;
            }
            None
        }
    })
}
