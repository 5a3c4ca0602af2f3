//! The fake's state: chats with their messages and topics, the update queue, recorded calls,
//! pollers, commands, webhook and rate limits, behind one mutex, plus the notifications that
//! wake long polls and `wait_for`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use super::limits::Limiter;
use super::reply::ApiError;
use super::types::{BotCommand, ChatAction, ChatSpec, ForumTopic, Pollers, RecordedCall, UserSpec};

/// The bot's user id.
pub(crate) const BOT_ID: i64 = 123_456;
/// The bot's username.
pub(crate) const BOT_USERNAME: &str = "chela_test_bot";
/// The one accepted token.
pub(crate) const TOKEN: &str = "123456:TEST";
/// The icon color of topics created without one (0x6FB9F0).
pub(crate) const DEFAULT_ICON_COLOR: i64 = 7_322_096;

/// The bot as a Bot API `User`.
pub(crate) fn bot_user() -> Value {
    json!({ "id": BOT_ID, "is_bot": true, "first_name": "chela", "username": BOT_USERNAME })
}

/// Now as Unix seconds (the Bot API's `date`).
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// One message of a chat, user's or bot's, with its current Bot API JSON.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) json: Value,
    pub(crate) from_bot: bool,
    pub(crate) text: String,
    pub(crate) thread_id: Option<i64>,
    pub(crate) reply_to: Option<i64>,
    pub(crate) parse_mode: Option<String>,
    pub(crate) reply_markup: Option<Value>,
    pub(crate) edits: usize,
    pub(crate) deleted: bool,
}

impl Stored {
    /// A message a user sent: `json` as Telegram shows it, `text` (or caption) as written.
    pub(crate) fn from_user(
        json: Value,
        text: &str,
        thread_id: Option<i64>,
        reply_to: Option<i64>,
    ) -> Stored {
        Stored {
            json,
            from_bot: false,
            text: text.to_owned(),
            thread_id,
            reply_to,
            parse_mode: None,
            reply_markup: None,
            edits: 0,
            deleted: false,
        }
    }
}

/// A chat the fake knows.
#[derive(Debug, Clone)]
pub(crate) struct Chat {
    pub(crate) spec: ChatSpec,
    next_message_id: i64,
    pub(crate) messages: BTreeMap<i64, Stored>,
    pub(crate) topics: BTreeMap<i64, ForumTopic>,
    pub(crate) actions: Vec<ChatAction>,
}

impl Chat {
    fn new(spec: ChatSpec) -> Chat {
        Chat {
            spec,
            next_message_id: 1,
            messages: BTreeMap::new(),
            topics: BTreeMap::new(),
            actions: Vec::new(),
        }
    }

    /// The next message id of this chat.
    pub(crate) fn allocate_id(&mut self) -> i64 {
        let id = self.next_message_id;
        self.next_message_id += 1;
        id
    }

    /// The topic a bot call may use: non-forum chats ignore `thread`; in a forum `None` is the
    /// General topic, `Some(1)` is allowed only when `general_ok` (chat actions), and any
    /// other id must be a known topic.
    pub(crate) fn bot_thread(
        &self,
        thread: Option<i64>,
        general_ok: bool,
    ) -> Result<Option<i64>, ApiError> {
        if !self.spec.is_forum {
            return Ok(None);
        }
        match thread {
            None => Ok(None),
            Some(1) if general_ok => Ok(Some(1)),
            Some(t) if t != 1 && self.topics.contains_key(&t) => Ok(Some(t)),
            Some(_) => Err(ApiError::thread_not_found()),
        }
    }

    /// Creates a topic with its `forum_topic_created` service message from `creator`.
    pub(crate) fn create_topic(
        &mut self,
        name: &str,
        icon_color: i64,
        creator: Value,
        id: Option<i64>,
    ) -> ForumTopic {
        let thread = match id {
            Some(id) => {
                self.next_message_id = self.next_message_id.max(id + 1);
                id
            }
            None => self.allocate_id(),
        };
        let json = json!({
            "message_id": thread,
            "message_thread_id": thread,
            "from": creator,
            "chat": self.spec.to_json(),
            "date": unix_now(),
            "is_topic_message": true,
            "forum_topic_created": { "name": name, "icon_color": icon_color },
        });
        let from_bot = json["from"]["id"] == json!(BOT_ID);
        self.messages.insert(
            thread,
            Stored {
                json,
                from_bot,
                text: String::new(),
                thread_id: Some(thread),
                reply_to: None,
                parse_mode: None,
                reply_markup: None,
                edits: 0,
                deleted: false,
            },
        );
        let topic = ForumTopic {
            message_thread_id: thread,
            name: name.to_owned(),
            icon_color,
        };
        self.topics.insert(thread, topic.clone());
        topic
    }

    /// The JSON of message `id` to nest as `reply_to_message` (without its own reply), if it
    /// exists and is not deleted.
    pub(crate) fn reply_json(&self, id: i64) -> Option<Value> {
        let stored = self.messages.get(&id).filter(|m| !m.deleted)?;
        let mut json = stored.json.clone();
        if let Some(map) = json.as_object_mut() {
            map.remove("reply_to_message");
        }
        Some(json)
    }

    /// A new text message: `from`, `text`, `entities`, topic fields for a forum topic, and the
    /// nested `reply_to_message` (the explicit reply, else in a topic its creation message,
    /// as Telegram does).
    pub(crate) fn message_json(
        &self,
        id: i64,
        from: Value,
        text: &str,
        entities: Option<Value>,
        thread: Option<i64>,
        reply: Option<i64>,
    ) -> Value {
        let mut message = json!({
            "message_id": id,
            "from": from,
            "chat": self.spec.to_json(),
            "date": unix_now(),
            "text": text,
        });
        if let Some(entities) = entities.filter(|e| e.as_array().is_some_and(|a| !a.is_empty())) {
            message["entities"] = entities;
        }
        let topic = thread.filter(|&t| t != 1 && self.spec.is_forum);
        if let Some(topic) = topic {
            message["message_thread_id"] = json!(topic);
            message["is_topic_message"] = json!(true);
        }
        if let Some(nested) = reply.or(topic).and_then(|r| self.reply_json(r)) {
            message["reply_to_message"] = nested;
        }
        message
    }
}

/// Everything behind the mutex.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) chats: BTreeMap<i64, Chat>,
    /// Unconfirmed updates, oldest first.
    pub(crate) updates: VecDeque<Value>,
    pub(crate) last_update_id: i64,
    pub(crate) allowed_updates: Vec<String>,
    pub(crate) pollers: Pollers,
    /// `setMyCommands` lists by `scope` JSON + `|` + language code.
    pub(crate) commands: BTreeMap<String, Vec<BotCommand>>,
    pub(crate) webhook: Option<String>,
    pub(crate) limiter: Limiter,
    /// Button presses made so far (numbers their callback query ids).
    pub(crate) presses: u64,
    pub(crate) faults: super::faults::Injector,
    /// Administrators by chat id (`getChatMember` answers `administrator` for them).
    pub(crate) admins: BTreeMap<i64, BTreeMap<i64, UserSpec>>,
    /// Placeholder texts and the raw JSON string content that replaces them in response
    /// bodies (see `FakeTelegram::user_sends_raw`).
    pub(crate) raw_texts: Vec<(String, String)>,
    /// Files users sent, by `file_id`.
    pub(crate) files: BTreeMap<String, super::files::StoredFile>,
    /// Downloads of files so far.
    pub(crate) file_downloads: usize,
    /// Files the bot uploaded, in order.
    pub(crate) uploads: Vec<super::uploads::Upload>,
    /// File names whose uploads fail with a 500 (see `FakeTelegram::fail_uploads_of`).
    pub(crate) failing_uploads: Vec<String>,
    /// The bot's reaction by (chat, message): its emoji.
    pub(crate) reactions: BTreeMap<(i64, i64), Vec<String>>,
    /// Messages the bot pinned: (chat, message), in order.
    pub(crate) pins: Vec<(i64, i64)>,
}

impl State {
    /// Registers `spec` (updating a known chat's description, keeping its messages).
    pub(crate) fn upsert_chat(&mut self, spec: ChatSpec) -> &mut Chat {
        let chat = self
            .chats
            .entry(spec.id)
            .or_insert_with(|| Chat::new(spec.clone()));
        if spec.is_forum {
            // Id 1 is the General topic (the forum's creation message): topics never get it.
            chat.next_message_id = chat.next_message_id.max(2);
        }
        chat.spec = spec;
        chat
    }

    /// Queues an update of `kind` (`message`, `edited_message`) carrying `payload`.
    pub(crate) fn push_update(&mut self, kind: &str, payload: Value) {
        self.last_update_id += 1;
        let mut update = json!({ "update_id": self.last_update_id });
        update[kind] = payload;
        self.updates.push_back(update);
    }
}

/// State shared by the handlers and the [`FakeTelegram`](super::FakeTelegram) handle.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified on every change: calls, messages, actions, pollers.
    pub(crate) changed: Notify,
    /// Notified when an update is queued.
    pub(crate) new_update: Notify,
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// Empty state; long polls end when `shutdown` turns true or its sender is dropped.
    pub(crate) fn new(shutdown: watch::Receiver<bool>) -> Shared {
        let state = State {
            last_update_id: 10_000,
            ..State::default()
        };
        Shared {
            state: Mutex::new(state),
            changed: Notify::new(),
            new_update: Notify::new(),
            shutdown,
        }
    }

    /// Locks the state (a poisoned lock is used anyway).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes everyone waiting for a change.
    pub(crate) fn touch(&self) {
        self.changed.notify_waiters();
    }
}
