//! The gateway's [`SessionsApi`]: what the `message`, `sessions_list` and `sessions_history`
//! tools do. A session can be messaged once it has replied somewhere (the store remembers
//! where); text sent to the run's own conversation is kept so the final reply does not repeat
//! it.

use std::sync::Weak;

use chela_channel::Conversation;

use super::Core;
use crate::agent::provider::BoxFuture;
use crate::agent::tools::refusal::ToolRefusal;
use crate::agent::tools::sessions::SessionsApi;
use crate::domain::message::{Message, text_of};
use crate::store::SubagentState;

/// Chars of one message `sessions_history` shows.
const HISTORY_LINE_CHARS: usize = 500;

/// Session tools for chela's agent.
pub struct GatewaySessions {
    /// The core (weak: the core owns the agent that holds this).
    pub core: Weak<Core>,
}

impl SessionsApi for GatewaySessions {
    fn send(
        &self,
        from: String,
        reply_to: Option<Conversation>,
        target: Option<String>,
        text: String,
    ) -> BoxFuture<'static, Result<String, ToolRefusal>> {
        let core = self.core.clone();
        Box::pin(async move {
            let core = core.upgrade().ok_or(ToolRefusal::ShuttingDown)?;
            let (key, to) = match target {
                None => {
                    let to =
                        reply_to.ok_or("there is no conversation to send to outside a chat run")?;
                    (from.clone(), to)
                }
                Some(key) => {
                    let to = core
                        .store
                        .target(&key)
                        ?
                        .ok_or_else(|| {
                            format!("unknown session {key:?}: it has never replied in a chat (see sessions_list)")
                        })?;
                    (key, to)
                }
            };
            if to.channel == super::subagent::INTERNAL_CHANNEL {
                return Err(ToolRefusal::Refused(format!(
                    "session {key} has no chat to send to (a subagent's final answer goes back \
                     to its parent session by itself)"
                )));
            }
            core.send_text(&to, &text)
                .await
                .map_err(|e| ToolRefusal::Failed(e.to_string()))?;
            Ok(format!(
                "sent to {} ({} chat {})",
                key, to.channel, to.chat_id
            ))
        })
    }

    fn list(&self, limit: usize) -> Result<Vec<String>, ToolRefusal> {
        let core = self.core.upgrade().ok_or(ToolRefusal::ShuttingDown)?;
        let mut sessions = core.store.list_sessions()?;
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
        let now = crate::domain::message::now_ms();
        Ok(sessions
            .into_iter()
            .take(limit)
            .map(|s| {
                let ago = now.saturating_sub(s.updated_ms) / 1000;
                let bound = core
                    .acp
                    .binding(&s.key)
                    .map(|b| format!(", bound to {}", b.harness))
                    .unwrap_or_default();
                let parent = match core.store.subagent(&s.key) {
                    Ok(Some(link)) => format!(
                        ", subagent of {} ({})",
                        link.parent,
                        match link.state {
                            SubagentState::Running => "running",
                            SubagentState::Stopped => "stopped",
                            SubagentState::Done => "done",
                        }
                    ),
                    _ => String::new(),
                };
                format!(
                    "{} — {} entries, active {ago} s ago{bound}{parent}",
                    s.key, s.entries
                )
            })
            .collect())
    }

    fn history(&self, key: &str, limit: usize) -> Result<Vec<String>, ToolRefusal> {
        let core = self.core.upgrade().ok_or(ToolRefusal::ShuttingDown)?;
        let window = core.store.window(key)?;
        let lines: Vec<String> = window
            .iter()
            .filter_map(|message| {
                let (role, text) = match message {
                    Message::User(m) => ("user", text_of(&m.content)),
                    Message::Assistant(m) => ("assistant", text_of(&m.content)),
                    Message::ToolResult(_) => return None,
                };
                let text = text.trim();
                (!text.is_empty()).then(|| {
                    let short: String = text.chars().take(HISTORY_LINE_CHARS).collect();
                    format!("{role}: {short}")
                })
            })
            .collect();
        let skip = lines.len().saturating_sub(limit);
        Ok(lines.into_iter().skip(skip).collect())
    }
}
