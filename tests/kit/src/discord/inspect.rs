//! What tests read back: the bot's messages, recorded calls, typing, commands, threads, pins,
//! polls, the gateway's counters and dispatches, and waiting for any of these to reach a
//! state.

use std::time::Duration;

use serde_json::Value;

use super::FakeDiscord;
use super::types::{BotMessage, RecordedCall, ThreadInfo};

impl FakeDiscord {
    /// The bot's messages in `channel_id` (a thread is a channel), in id order, deleted ones
    /// included (marked).
    pub fn sent(&self, channel_id: u64) -> Vec<BotMessage> {
        let state = self.shared.lock();
        let Some(channel) = state.channels.get(&channel_id) else {
            return Vec::new();
        };
        channel
            .messages
            .iter()
            .filter(|(_, m)| m.from_bot)
            .map(|(&id, m)| BotMessage {
                id,
                channel_id,
                content: m.content.clone(),
                edits: m.edits,
                deleted: m.deleted,
                nonce: m.nonce.clone(),
                reference: m.reference,
                allowed_mentions: m.allowed_mentions.clone(),
                embeds: m.json["embeds"].as_array().cloned().unwrap_or_default(),
                attachments: m.attachments.clone(),
                buttons: super::components::buttons_of(&m.json),
                menu: super::components::menu_of(&m.json),
            })
            .collect()
    }

    /// The bytes of the files the bot's message `message_id` in `channel_id` was sent with,
    /// in order (as served at their attachment URLs).
    pub fn attachment_bytes(&self, channel_id: u64, message_id: u64) -> Vec<Vec<u8>> {
        let state = self.shared.lock();
        let Some(message) = state
            .channels
            .get(&channel_id)
            .and_then(|c| c.messages.get(&message_id))
        else {
            return Vec::new();
        };
        message.json["attachments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                let url = a["url"].as_str()?;
                let path = &url[url.find("/attachments/")?..];
                state.files.get(path).cloned()
            })
            .collect()
    }

    /// Every message of `channel_id` (users' and the bot's) as its current REST JSON, in id
    /// order; deleted ones left out.
    pub fn messages(&self, channel_id: u64) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .channels
            .get(&channel_id)
            .map(|c| {
                c.messages
                    .values()
                    .filter(|m| !m.deleted)
                    .map(|m| m.json.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The emoji the bot reacted with on message `message_id` of `channel_id` (as given in
    /// the path, percent-decoded), in order, removed ones left out.
    pub fn reactions(&self, channel_id: u64, message_id: u64) -> Vec<String> {
        let state = self.shared.lock();
        state
            .channels
            .get(&channel_id)
            .and_then(|c| c.messages.get(&message_id))
            .map(|m| m.reactions.clone())
            .unwrap_or_default()
    }

    /// Every authorized REST call so far, in arrival order (unknown routes included).
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.shared.lock().calls.clone()
    }

    /// How many calls with `method` (`POST`) to exactly `path` (`/channels/1/messages`)
    /// arrived, successful or not.
    pub fn call_count(&self, method: &str, path: &str) -> usize {
        let state = self.shared.lock();
        state
            .calls
            .iter()
            .filter(|c| c.method.eq_ignore_ascii_case(method) && c.path == path)
            .count()
    }

    /// How many times the bot triggered typing in `channel_id`.
    pub fn typing(&self, channel_id: u64) -> usize {
        let state = self.shared.lock();
        state.channels.get(&channel_id).map_or(0, |c| c.typing)
    }

    /// The global application commands, as stored (with ids, `application_id`, `version`).
    pub fn commands(&self) -> Vec<Value> {
        let state = self.shared.lock();
        state.commands.get(&None).cloned().unwrap_or_default()
    }

    /// The application commands of guild `guild_id`.
    pub fn guild_commands(&self, guild_id: u64) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .commands
            .get(&Some(guild_id))
            .cloned()
            .unwrap_or_default()
    }

    /// Interaction callbacks: `{"interaction_id", "token", "body"}` each, in order.
    pub fn interaction_callbacks(&self) -> Vec<Value> {
        self.shared.lock().interaction_callbacks.clone()
    }

    /// Every thread the fake knows (made by users or the bot), in id order.
    pub fn threads(&self) -> Vec<ThreadInfo> {
        let state = self.shared.lock();
        state
            .channels
            .values()
            .filter_map(|c| {
                let meta = c.thread.as_ref()?;
                Some(ThreadInfo {
                    id: c.spec.id,
                    guild_id: c.spec.guild_id.unwrap_or_default(),
                    parent_id: c.spec.parent_id.unwrap_or_default(),
                    name: c.spec.display_name(),
                    kind: c.spec.kind.type_id(),
                    owner_id: meta.owner_id,
                    starter_message_id: meta.starter_message_id,
                    archived: meta.archived,
                    locked: meta.locked,
                })
            })
            .collect()
    }

    /// How many IDENTIFYs were accepted.
    pub fn identify_count(&self) -> usize {
        self.shared.lock().identify_count
    }

    /// How many RESUMEs were accepted (answered with RESUMED).
    pub fn resume_count(&self) -> usize {
        self.shared.lock().resume_count
    }

    /// How many heartbeats (op 1) arrived.
    pub fn heartbeat_count(&self) -> usize {
        self.shared.lock().heartbeat_count
    }

    /// The intents of the last IDENTIFY.
    pub fn intents(&self) -> Option<u64> {
        self.shared.lock().intents
    }

    /// Whether a session (of any shard) is live on an open connection (after READY or
    /// RESUMED, until the connection ends or the session is invalidated).
    pub fn connected(&self) -> bool {
        !self.connected_shards().is_empty()
    }

    /// The shards (`[id, num_shards]`, `[0, 1]` for a client that named none) whose session
    /// is live on an open connection, in order.
    pub fn connected_shards(&self) -> Vec<[u32; 2]> {
        let state = self.shared.lock();
        state
            .sessions
            .values()
            .filter(|s| s.conn.is_some_and(|conn| state.open.contains(&conn)))
            .map(|s| s.shard)
            .collect()
    }

    /// How many gateway connections are open (identified or not).
    pub fn open_connections(&self) -> usize {
        self.shared.lock().open.len()
    }

    /// The current session id of shard 0 (the only one without sharding; of the fewest
    /// shards when clients of several `num_shards` connected), if any.
    pub fn session_id(&self) -> Option<String> {
        let state = self.shared.lock();
        let session = state.sessions.values().find(|s| s.shard[0] == 0);
        session.map(|s| s.id.clone())
    }

    /// Every dispatch of shard 0's current session (`{"op":0,"t":..,"s":..,"d":..}`), in
    /// order, after intent filtering (what the client was or will be sent).
    pub fn dispatches(&self) -> Vec<Value> {
        self.shard_dispatches(0)
    }

    /// Every dispatch of the current session of shard `shard` (of the fewest shards when
    /// clients of several `num_shards` connected), as [`FakeDiscord::dispatches`].
    pub fn shard_dispatches(&self, shard: u32) -> Vec<Value> {
        let state = self.shared.lock();
        let session = state.sessions.values().find(|s| s.shard[0] == shard);
        session.map(|s| s.log.clone()).unwrap_or_default()
    }

    /// Every dispatch of the current session of shard `[id, num_shards]`, as
    /// [`FakeDiscord::dispatches`].
    pub fn layout_dispatches(&self, shard: [u32; 2]) -> Vec<Value> {
        let state = self.shared.lock();
        let session = state.sessions.get(&shard);
        session.map(|s| s.log.clone()).unwrap_or_default()
    }

    /// Every payload clients sent over the gateway (IDENTIFY, heartbeats, RESUME, ...).
    pub fn gateway_received(&self) -> Vec<Value> {
        self.shared.lock().received.clone()
    }

    /// How many sends/edits were answered 429 (injected or enforced).
    pub fn rate_limited_count(&self) -> usize {
        self.shared.lock().limiter.refused
    }

    /// How many sends/edits came into a channel before the `retry_after` of its last 429 had
    /// passed (a bot that does not honour Discord's wait).
    pub fn early_retry_count(&self) -> usize {
        self.shared.lock().limiter.early
    }

    /// Waits until `predicate` holds for the fake, re-checking on every change (call,
    /// message, gateway event), at most `timeout`. Returns whether it holds.
    pub async fn wait_for<F>(&self, mut predicate: F, timeout: Duration) -> bool
    where
        F: FnMut(&FakeDiscord) -> bool,
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

    /// Waits until the bot has at least `count` messages (deleted included) in `channel_id`.
    pub async fn wait_for_sent(&self, channel_id: u64, count: usize, timeout: Duration) -> bool {
        self.wait_for(|d| d.sent(channel_id).len() >= count, timeout)
            .await
    }

    /// The id of the message the bot sent last in `channel_id`, if any.
    pub fn last_sent_id(&self, channel_id: u64) -> Option<u64> {
        self.sent(channel_id).last().map(|m| m.id)
    }
}

/// Pins and polls.
impl FakeDiscord {
    /// The messages of `channel_id` pinned now, in id order.
    pub fn pinned(&self, channel_id: u64) -> Vec<u64> {
        let state = self.shared.lock();
        state
            .channels
            .get(&channel_id)
            .map(|c| {
                c.messages
                    .iter()
                    .filter(|(_, m)| !m.deleted && m.json["pinned"] == Value::Bool(true))
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The polls the bot sent into `channel_id` and did not delete: message id and `poll`.
    pub fn polls(&self, channel_id: u64) -> Vec<(u64, Value)> {
        let state = self.shared.lock();
        state
            .channels
            .get(&channel_id)
            .map(|c| {
                c.messages
                    .iter()
                    .filter(|(_, m)| m.from_bot && !m.deleted)
                    .filter_map(|(id, m)| m.json.get("poll").map(|p| (*id, p.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }
}
