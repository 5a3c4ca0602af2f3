//! Messages as Slack shows them: the JSON of a stored message (with its thread summary,
//! files, edits, reactions), the `message` event of a new one, storing and threading.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::json::{self, APP_ID, BOT_ID, TEAM_ID};
use super::state::State;
use super::types::ChannelSpec;

/// One message of a conversation, a person's or the bot's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stored {
    pub(crate) ts: String,
    pub(crate) user: String,
    pub(crate) text: String,
    /// The thread it is a reply in (never its own `ts`).
    pub(crate) thread_ts: Option<String>,
    pub(crate) blocks: Option<Value>,
    /// Ids of the files it carries.
    pub(crate) files: Vec<String>,
    pub(crate) subtype: Option<String>,
    pub(crate) from_bot: bool,
    /// A thread reply also shown in the channel.
    pub(crate) broadcast: bool,
    pub(crate) edits: usize,
    pub(crate) edit_history: Vec<String>,
    /// The `ts` of the last edit.
    pub(crate) edited: Option<String>,
    pub(crate) deleted: bool,
    /// Reactions the bot added.
    pub(crate) reactions: Vec<String>,
    pub(crate) pinned: bool,
}

/// A conversation the fake knows, its messages by `ts` in microseconds.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub(crate) spec: ChannelSpec,
    pub(crate) messages: BTreeMap<u64, Stored>,
}

impl Channel {
    /// The live (not deleted) message `ts`.
    pub(crate) fn live(&self, ts: &str) -> Option<&Stored> {
        let key = json::parse_ts(ts)?;
        self.messages.get(&key).filter(|m| !m.deleted)
    }

    /// The live message `ts`, to change.
    pub(crate) fn live_mut(&mut self, ts: &str) -> Option<&mut Stored> {
        let key = json::parse_ts(ts)?;
        self.messages.get_mut(&key).filter(|m| !m.deleted)
    }

    /// The live replies in thread `parent`, oldest first.
    pub(crate) fn replies<'a>(&'a self, parent: &'a str) -> impl Iterator<Item = &'a Stored> {
        self.messages
            .values()
            .filter(move |m| !m.deleted && m.thread_ts.as_deref() == Some(parent))
    }
}

impl State {
    /// The JSON of file `id` (`files` of a message), if it exists.
    pub(crate) fn file_json(&self, id: &str) -> Option<Value> {
        let file = self.files.get(id)?;
        let name = json::path_segment(&file.name);
        let url = format!("{}/files/{}/{name}", self.base_url, file.id);
        let size = file.bytes.as_ref().map_or(file.length, |b| b.len() as u64);
        Some(json!({
            "id": file.id,
            "created": json::now_secs(),
            "name": file.name,
            "title": file.title,
            "mimetype": file.mimetype,
            "filetype": json::filetype(&file.name),
            "user": file.user,
            "size": size,
            "mode": "hosted",
            "is_external": false,
            "url_private": url,
            "url_private_download": url,
        }))
    }

    /// The JSON of message `m` of `channel` as `conversations.history` shows it.
    pub(crate) fn render(&self, channel: &Channel, m: &Stored) -> Value {
        let mut v = json!({
            "type": "message",
            "user": m.user,
            "text": m.text,
            "ts": m.ts,
            "team": TEAM_ID,
        });
        if m.from_bot {
            v["bot_id"] = json!(BOT_ID);
            v["app_id"] = json!(APP_ID);
            v["bot_profile"] = json::bot_profile();
        }
        let subtype = m
            .subtype
            .clone()
            .or_else(|| m.broadcast.then(|| "thread_broadcast".to_owned()));
        if let Some(subtype) = subtype {
            v["subtype"] = json!(subtype);
        }
        if let Some(blocks) = &m.blocks {
            v["blocks"] = blocks.clone();
        }
        if let Some(parent) = &m.thread_ts {
            v["thread_ts"] = json!(parent);
            if let Some(p) = channel.live(parent) {
                v["parent_user_id"] = json!(p.user);
            }
        } else {
            let replies: Vec<&Stored> = channel.replies(&m.ts).collect();
            if let Some(latest) = replies.last() {
                let mut users: Vec<&str> = Vec::new();
                for reply in &replies {
                    if !users.contains(&reply.user.as_str()) {
                        users.push(&reply.user);
                    }
                }
                v["thread_ts"] = json!(m.ts);
                v["reply_count"] = json!(replies.len());
                v["reply_users_count"] = json!(users.len());
                v["reply_users"] = json!(users);
                v["latest_reply"] = json!(latest.ts);
            }
        }
        if !m.files.is_empty() {
            let files: Vec<Value> = m.files.iter().filter_map(|id| self.file_json(id)).collect();
            v["files"] = json!(files);
            v["upload"] = json!(false);
        }
        if let Some(edited) = &m.edited {
            v["edited"] = json!({ "user": m.user, "ts": edited });
        }
        if !m.reactions.is_empty() {
            let reactions: Vec<Value> = m
                .reactions
                .iter()
                .map(|name| json!({ "name": name, "users": [json::BOT_USER], "count": 1 }))
                .collect();
            v["reactions"] = json!(reactions);
        }
        if m.pinned {
            v["pinned_to"] = json!([channel.spec.id]);
        }
        v
    }

    /// The JSON of the live message `ts` of `channel`, if any.
    pub(crate) fn message_json(&self, channel: &str, ts: &str) -> Option<Value> {
        let ch = self.channels.get(channel)?;
        let m = ch.live(ts)?;
        Some(self.render(ch, m))
    }

    /// The `message` event of the live message `ts` of `channel`: its JSON with `channel`,
    /// `channel_type` and `event_ts`.
    pub(crate) fn message_event(&self, channel: &str, ts: &str) -> Option<Value> {
        let ch = self.channels.get(channel)?;
        let mut event = self.render(ch, ch.live(ts)?);
        event["channel"] = json!(channel);
        event["channel_type"] = json!(ch.spec.kind.channel_type());
        event["event_ts"] = json!(ts);
        Some(event)
    }

    /// Stores `message` in `channel` under a new `ts`; returns the `ts`.
    pub(crate) fn store(&mut self, channel: &str, mut message: Stored) -> String {
        let ts = self.next_ts();
        message.ts.clone_from(&ts);
        if let (Ok(ch), Some(key)) = (self.channel_mut(channel), json::parse_ts(&ts)) {
            ch.messages.insert(key, message);
        }
        ts
    }

    /// Stores `message` in `channel` and dispatches its `message` event; returns the `ts`.
    pub(crate) fn store_and_dispatch(&mut self, channel: &str, message: Stored) -> String {
        let ts = self.store(channel, message);
        if let Some(event) = self.message_event(channel, &ts) {
            self.dispatch_event(event);
        }
        ts
    }

    /// The thread a reply to `thread_ts` in `channel` goes into: `thread_ts` itself if it is
    /// a live top-level message, its parent if it is a reply; else `thread_not_found`.
    pub(crate) fn thread_root(
        &self,
        channel: &str,
        thread_ts: &str,
    ) -> Result<String, &'static str> {
        let ch = self.channel(channel)?;
        let m = ch.live(thread_ts).ok_or("thread_not_found")?;
        Ok(m.thread_ts.clone().unwrap_or_else(|| m.ts.clone()))
    }
}
