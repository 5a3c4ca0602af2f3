//! What tests read back about conversations: the bot's messages (live and deleted), every
//! message, reactions, pins, files, ephemerals and recorded calls; and waiting for any of it.

use std::time::Duration;

use serde_json::Value;

use super::FakeSlack;
use super::messages::Stored;
use super::state::State;
use super::types::{Ephemeral, RecordedCall, SentMessage};

/// The bot's message `m` of `channel` as a [`SentMessage`].
fn sent_message(state: &State, channel: &str, m: &Stored) -> SentMessage {
    let files = m
        .files
        .iter()
        .map(|id| {
            let name = state.files.get(id).map(|f| f.name.clone());
            (id.clone(), name.unwrap_or_default())
        })
        .collect();
    SentMessage {
        channel: channel.to_owned(),
        ts: m.ts.clone(),
        text: m.text.clone(),
        thread_ts: m.thread_ts.clone(),
        blocks: m.blocks.clone(),
        reply_broadcast: m.broadcast,
        edits: m.edits,
        edit_history: m.edit_history.clone(),
        files,
        reactions: m.reactions.clone(),
        pinned: m.pinned,
    }
}

impl FakeSlack {
    /// The bot's messages in `channel` that are not deleted (thread replies included), in
    /// `ts` order.
    pub fn sent(&self, channel: &str) -> Vec<SentMessage> {
        self.bot_messages(channel, false)
    }

    /// The bot's messages in `channel` that were deleted (`chat.delete`), in `ts` order.
    pub fn deleted(&self, channel: &str) -> Vec<SentMessage> {
        self.bot_messages(channel, true)
    }

    fn bot_messages(&self, channel: &str, deleted: bool) -> Vec<SentMessage> {
        let state = self.shared.lock();
        let Some(ch) = state.channels.get(channel) else {
            return Vec::new();
        };
        ch.messages
            .values()
            .filter(|m| m.from_bot && m.deleted == deleted)
            .map(|m| sent_message(&state, channel, m))
            .collect()
    }

    /// The bot's last live message in `channel`, if any.
    pub fn last_sent(&self, channel: &str) -> Option<SentMessage> {
        self.sent(channel).pop()
    }

    /// Every live message of `channel` (users' and the bot's, thread replies included) as
    /// `conversations.history` would show it, in `ts` order.
    pub fn messages(&self, channel: &str) -> Vec<Value> {
        let state = self.shared.lock();
        let Some(ch) = state.channels.get(channel) else {
            return Vec::new();
        };
        ch.messages
            .values()
            .filter(|m| !m.deleted)
            .map(|m| state.render(ch, m))
            .collect()
    }

    /// The bot's reactions on message `ts` of `channel`, in order.
    pub fn reactions(&self, channel: &str, ts: &str) -> Vec<String> {
        let state = self.shared.lock();
        let message = state.channels.get(channel).and_then(|c| c.live(ts));
        message.map(|m| m.reactions.clone()).unwrap_or_default()
    }

    /// The `ts` of the pinned live messages of `channel`, in order.
    pub fn pinned(&self, channel: &str) -> Vec<String> {
        let state = self.shared.lock();
        let Some(ch) = state.channels.get(channel) else {
            return Vec::new();
        };
        ch.messages
            .values()
            .filter(|m| m.pinned && !m.deleted)
            .map(|m| m.ts.clone())
            .collect()
    }

    /// The bytes uploaded for file `file_id` (the bot's uploads and users' files alike).
    pub fn uploaded(&self, file_id: &str) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        state.files.get(file_id).and_then(|f| f.bytes.clone())
    }

    /// The ids of the files fetched from their `url_private` with the bot token, in order.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().downloads.clone()
    }

    /// The ephemeral messages the bot sent, in order.
    pub fn ephemerals(&self) -> Vec<Ephemeral> {
        self.shared.lock().ephemerals.clone()
    }

    /// Every Web API call so far, in arrival order (refused ones included).
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.shared.lock().calls.clone()
    }

    /// How many calls of `method` arrived, whatever they were answered.
    pub fn call_count(&self, method: &str) -> usize {
        let state = self.shared.lock();
        state.calls.iter().filter(|c| c.method == method).count()
    }

    /// How many calls were answered 429 (see [`FakeSlack::inject_429`]).
    pub fn rate_limited_count(&self) -> usize {
        self.shared.lock().rate_limited
    }

    /// Waits until `predicate` holds for the fake, re-checking on every change (call,
    /// message, connection, ack), at most `timeout`. Returns whether it holds.
    pub async fn wait_for<F>(&self, mut predicate: F, timeout: Duration) -> bool
    where
        F: FnMut(&FakeSlack) -> bool,
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

    /// Waits until the bot has at least `count` live messages in `channel`.
    pub async fn wait_for_sent(&self, channel: &str, count: usize, timeout: Duration) -> bool {
        self.wait_for(|s| s.sent(channel).len() >= count, timeout)
            .await
    }
}
