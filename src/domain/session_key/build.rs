//! The one session-key builder and the agent-id grammar.

use std::collections::BTreeMap;

use chela_channel::{ChatKind, Conversation};

use super::DmScope;
use super::{KeyBase, SessionKey};

/// Longest agent id.
const AGENT_ID_MAX: usize = 64;

/// True when `id` matches `[a-z0-9][a-z0-9_-]{0,63}`.
pub fn is_valid_agent_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    matches!(bytes.first(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && bytes.len() <= AGENT_ID_MAX
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

/// Normalizes an agent id to `[a-z0-9][a-z0-9_-]{0,63}`: lowercased, each run of invalid chars
/// becomes one `-` (as OpenClaw does), leading `-`/`_` and trailing `-` are trimmed, the result
/// is cut to 64 chars, and an empty result becomes `main`.
pub fn normalize_agent_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.trim().to_lowercase().chars() {
        if matches!(c, 'a'..='z' | '0'..='9' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_start_matches(['-', '_']);
    let cut: String = trimmed.chars().take(AGENT_ID_MAX).collect();
    let cut = cut.trim_end_matches('-');
    if cut.is_empty() {
        "main".to_owned()
    } else {
        cut.to_owned()
    }
}

/// Lowercases a component; an empty one becomes `fallback`.
fn component(value: &str, fallback: &str) -> String {
    let value = value.trim().to_lowercase();
    if value.is_empty() {
        fallback.to_owned()
    } else {
        value
    }
}

/// The canonical peer of `channel:sender` in `identity_links`, if it is linked.
fn linked_peer<'a>(
    channel: &str,
    sender: &str,
    identity_links: &'a BTreeMap<String, Vec<String>>,
) -> Option<&'a str> {
    identity_links.iter().find_map(|(canonical, ids)| {
        ids.iter()
            .any(|id| {
                id.split_once(':').is_some_and(|(c, p)| {
                    c.trim().eq_ignore_ascii_case(channel.trim())
                        && p.trim().to_lowercase() == sender.trim().to_lowercase()
                })
            })
            .then_some(canonical.as_str())
    })
}

/// Builds the session key of a message (SPEC 1.2).
///
/// Direct messages follow `dm_scope` (the sender, or its canonical peer from `identity_links`
/// unless the scope is `main`; the chat id when the sender id is empty). Groups and rooms key by
/// chat. A Telegram group conversation with a thread id is a forum topic (`...:topic:<id>`;
/// mapping a forum message without a topic to `"1"` is the caller's job); any other thread id is
/// appended as `:thread:<id>`. Components are lowercased; empty ones become `unknown` (the
/// account `default`). The result always displays as a lowercase, parseable key.
pub fn build(
    agent: &str,
    conversation: &Conversation,
    sender_id: &str,
    dm_scope: DmScope,
    identity_links: &BTreeMap<String, Vec<String>>,
) -> SessionKey {
    let agent = normalize_agent_id(agent);
    let channel = component(&conversation.channel, "unknown");
    let chat = component(&conversation.chat_id, "unknown");
    let thread = conversation
        .thread_id
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .map(|t| component(t, "unknown"));
    let base = match conversation.kind {
        ChatKind::Direct => {
            let sender = if sender_id.trim().is_empty() {
                &conversation.chat_id
            } else {
                sender_id
            };
            let peer = match linked_peer(&conversation.channel, sender, identity_links) {
                Some(canonical) => component(canonical, "unknown"),
                None => component(sender, "unknown"),
            };
            match dm_scope {
                DmScope::Main => KeyBase::Main,
                DmScope::PerPeer => KeyBase::Direct { peer },
                DmScope::PerChannelPeer => KeyBase::ChannelDirect { channel, peer },
                DmScope::PerAccountChannelPeer => KeyBase::AccountDirect {
                    channel,
                    account: component(&conversation.account, "default"),
                    peer,
                },
            }
        }
        ChatKind::Group => {
            if channel == "telegram"
                && let Some(topic) = thread
            {
                return SessionKey::new(
                    agent,
                    KeyBase::Topic {
                        channel,
                        chat,
                        topic,
                    },
                );
            }
            KeyBase::Group { channel, chat }
        }
        ChatKind::Channel => KeyBase::Room { channel, chat },
    };
    SessionKey {
        agent,
        base,
        thread,
    }
}
