//! What tests read back: the bot's messages, recorded calls, chat actions, commands, pending
//! updates, pollers, topics, and waiting for any of these to reach a state.

use std::time::Duration;

use serde_json::Value;

use super::FakeTelegram;
use super::misc::default_commands_key;
use super::types::{BotCommand, BotMessage, ChatAction, ForumTopic, Pollers, RecordedCall};

impl FakeTelegram {
    /// The bot's messages in `chat_id` in id order, deleted ones included (marked).
    pub fn sent(&self, chat_id: i64) -> Vec<BotMessage> {
        let state = self.shared.lock();
        let Some(chat) = state.chats.get(&chat_id) else {
            return Vec::new();
        };
        chat.messages
            .iter()
            .filter(|(_, m)| m.from_bot && m.json.get("text").is_some())
            .map(|(&message_id, m)| BotMessage {
                message_id,
                text: m.text.clone(),
                thread_id: m.thread_id,
                reply_to: m.reply_to,
                edits: m.edits,
                deleted: m.deleted,
                parse_mode: m.parse_mode.clone(),
                buttons: buttons_of(m.reply_markup.as_ref()),
            })
            .collect()
    }

    /// From now on, uploads of files named one of `names` fail with a 500 (nothing is
    /// stored); an empty list lets every upload through again.
    pub fn fail_uploads_of(&self, names: &[&str]) {
        self.shared.lock().failing_uploads = names.iter().map(|n| (*n).to_owned()).collect();
    }

    /// The files the bot uploaded into `chat_id`, in order, with their bytes (deleted ones
    /// included: see [`FakeTelegram::messages`] for what is still there).
    pub fn uploads(&self, chat_id: i64) -> Vec<super::Upload> {
        let state = self.shared.lock();
        state
            .uploads
            .iter()
            .filter(|u| u.chat_id == chat_id)
            .cloned()
            .collect()
    }

    /// Every message of `chat_id` (users', the bot's, topic service messages) as its current
    /// Bot API JSON, in id order; deleted ones left out.
    pub fn messages(&self, chat_id: i64) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .chats
            .get(&chat_id)
            .map(|c| {
                c.messages
                    .values()
                    .filter(|m| !m.deleted)
                    .map(|m| m.json.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every authorized call so far, in arrival order (unknown methods included).
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.shared.lock().calls.clone()
    }

    /// How many calls of `method` (any case: `sendMessage`, `SendMessage`, `sendmessage`)
    /// arrived, successful or not.
    pub fn call_count(&self, method: &str) -> usize {
        let method = method.to_ascii_lowercase();
        let state = self.shared.lock();
        state.calls.iter().filter(|c| c.method == method).count()
    }

    /// The `sendChatAction`s in `chat_id`, in order.
    pub fn chat_actions(&self, chat_id: i64) -> Vec<ChatAction> {
        let state = self.shared.lock();
        state
            .chats
            .get(&chat_id)
            .map(|c| c.actions.clone())
            .unwrap_or_default()
    }

    /// The commands `setMyCommands` set for the default scope and language.
    pub fn commands(&self) -> Vec<BotCommand> {
        let state = self.shared.lock();
        state
            .commands
            .get(&default_commands_key())
            .cloned()
            .unwrap_or_default()
    }

    /// The updates not yet confirmed by an `offset`, oldest first.
    pub fn pending_updates(&self) -> Vec<Value> {
        self.shared.lock().updates.iter().cloned().collect()
    }

    /// What the fake saw of `getUpdates` pollers.
    pub fn pollers(&self) -> Pollers {
        self.shared.lock().pollers
    }

    /// The topics of forum `chat_id`, in id order.
    pub fn topics(&self, chat_id: i64) -> Vec<ForumTopic> {
        let state = self.shared.lock();
        state
            .chats
            .get(&chat_id)
            .map(|c| c.topics.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Waits until `predicate` holds for the fake, re-checking on every change (call, message,
    /// poller), at most `timeout`. Returns whether it holds.
    pub async fn wait_for<F>(&self, mut predicate: F, timeout: Duration) -> bool
    where
        F: FnMut(&FakeTelegram) -> bool,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if predicate(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return predicate(self);
            }
        }
    }

    /// Waits until at least `count` calls of `method` (any case) arrived, at most `timeout`.
    pub async fn wait_for_calls(&self, method: &str, count: usize, timeout: Duration) -> bool {
        self.wait_for(|t| t.call_count(method) >= count, timeout)
            .await
    }
}

/// The (label, data) of every callback button of an inline keyboard, row by row.
fn buttons_of(markup: Option<&serde_json::Value>) -> Vec<(String, String)> {
    let rows = markup.and_then(|m| m["inline_keyboard"].as_array());
    rows.into_iter()
        .flatten()
        .filter_map(|row| row.as_array())
        .flatten()
        .map(|b| {
            let text = |k: &str| b[k].as_str().unwrap_or_default().to_owned();
            (text("text"), text("callback_data"))
        })
        .collect()
}
