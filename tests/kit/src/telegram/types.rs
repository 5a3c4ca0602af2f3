//! The plain data types of the fake Telegram: how tests describe chats and users, and what
//! they read back (bot messages, calls, chat actions, commands, pollers).

use std::time::Duration;

use serde_json::{Value, json};

/// The kind of a Telegram chat, as in the Bot API's `Chat.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatKind {
    /// A one-to-one chat with a user (`"private"`); its id is the user's id.
    Private,
    /// A basic group (`"group"`).
    Group,
    /// A supergroup (`"supergroup"`), a forum when [`ChatSpec::is_forum`] is set.
    Supergroup,
    /// A channel (`"channel"`).
    Channel,
}

impl ChatKind {
    /// The Bot API name: `private`, `group`, `supergroup` or `channel`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatKind::Private => "private",
            ChatKind::Group => "group",
            ChatKind::Supergroup => "supergroup",
            ChatKind::Channel => "channel",
        }
    }
}

/// A chat as the fake knows it. Chats become known through
/// [`FakeTelegram::add_chat`](super::FakeTelegram::add_chat) or the first simulated user
/// message in them; bot calls naming an unknown chat get `400 Bad Request: chat not found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSpec {
    /// The chat id: the user's id for private chats, negative for groups (`-100...` for
    /// supergroups and forums).
    pub id: i64,
    /// The chat type.
    pub kind: ChatKind,
    /// The title of a group, supergroup or channel.
    pub title: Option<String>,
    /// Whether the supergroup is a forum (has topics).
    pub is_forum: bool,
    /// The other party's first name in a private chat (filled from the first sender if unset).
    pub first_name: Option<String>,
    /// The other party's username in a private chat (filled from the first sender if unset).
    pub username: Option<String>,
}

impl ChatSpec {
    /// The private chat with user `user_id` (chat id = user id).
    pub fn private(user_id: i64) -> ChatSpec {
        ChatSpec {
            id: user_id,
            kind: ChatKind::Private,
            title: None,
            is_forum: false,
            first_name: None,
            username: None,
        }
    }

    /// A basic group (use a negative id such as `-4001`).
    pub fn group(id: i64, title: &str) -> ChatSpec {
        ChatSpec {
            id,
            kind: ChatKind::Group,
            title: Some(title.to_owned()),
            is_forum: false,
            first_name: None,
            username: None,
        }
    }

    /// A supergroup without topics (use an id like `-1001234567890`).
    pub fn supergroup(id: i64, title: &str) -> ChatSpec {
        ChatSpec {
            kind: ChatKind::Supergroup,
            ..ChatSpec::group(id, title)
        }
    }

    /// A forum: a supergroup with `is_forum: true` (use an id like `-1001234567890`).
    pub fn forum(id: i64, title: &str) -> ChatSpec {
        ChatSpec {
            is_forum: true,
            ..ChatSpec::supergroup(id, title)
        }
    }

    /// Whether the chat is shared by several people (group, supergroup, channel): such chats
    /// get the group rate limit.
    pub fn is_group_like(&self) -> bool {
        self.kind != ChatKind::Private
    }

    /// The Bot API `Chat` object.
    pub fn to_json(&self) -> Value {
        let mut chat = json!({ "id": self.id, "type": self.kind.as_str() });
        if let Some(title) = &self.title {
            chat["title"] = json!(title);
        }
        if let Some(first_name) = &self.first_name {
            chat["first_name"] = json!(first_name);
        }
        if let Some(username) = &self.username {
            chat["username"] = json!(username);
        }
        if self.is_forum {
            chat["is_forum"] = json!(true);
        }
        chat
    }
}

/// A simulated (human) user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSpec {
    /// The user id (positive).
    pub id: i64,
    /// The first name (required by Telegram).
    pub first_name: String,
    /// The username without `@`, if any.
    pub username: Option<String>,
}

impl UserSpec {
    /// A user without a username.
    pub fn new(id: i64, first_name: &str) -> UserSpec {
        UserSpec {
            id,
            first_name: first_name.to_owned(),
            username: None,
        }
    }

    /// The same user with a username (without `@`).
    pub fn with_username(mut self, username: &str) -> UserSpec {
        self.username = Some(username.to_owned());
        self
    }

    /// The Bot API `User` object (`is_bot: false`).
    pub fn to_json(&self) -> Value {
        let mut user = json!({ "id": self.id, "is_bot": false, "first_name": self.first_name });
        if let Some(username) = &self.username {
            user["username"] = json!(username);
        }
        user
    }
}

/// A message entity a simulated user message carries. Offsets and lengths are in UTF-16 code
/// units, as in the Bot API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// The entity type: `mention`, `text_mention`, `bot_command`, `url`, `bold`, ...
    pub kind: String,
    /// Offset in UTF-16 code units.
    pub offset: usize,
    /// Length in UTF-16 code units.
    pub length: usize,
    /// The mentioned user, for `text_mention`.
    pub user: Option<UserSpec>,
}

impl Entity {
    /// An entity of type `kind` without a user.
    pub fn new(kind: &str, offset: usize, length: usize) -> Entity {
        Entity {
            kind: kind.to_owned(),
            offset,
            length,
            user: None,
        }
    }

    /// A `text_mention` of `user` (a mention of someone without a username).
    pub fn text_mention(offset: usize, length: usize, user: UserSpec) -> Entity {
        Entity {
            user: Some(user),
            ..Entity::new("text_mention", offset, length)
        }
    }

    /// The Bot API `MessageEntity` object.
    pub fn to_json(&self) -> Value {
        let mut entity = json!({ "type": self.kind, "offset": self.offset, "length": self.length });
        if let Some(user) = &self.user {
            entity["user"] = user.to_json();
        }
        entity
    }
}

/// Options for [`FakeTelegram::user_sends_with`](super::FakeTelegram::user_sends_with).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// Reply to this message of the same chat (the update then carries the full
    /// `reply_to_message`; an unknown id is ignored).
    pub reply_to_message_id: Option<i64>,
    /// The forum topic (`message_thread_id`); `None` or `Some(1)` is the General topic. A
    /// topic the fake does not know yet is created on the fly.
    pub message_thread_id: Option<i64>,
    /// Explicit entities. When empty, entities are detected: a `bot_command` when the text
    /// starts with `/`, a `mention` for every `@username`; when not empty, exactly these are
    /// sent.
    pub entities: Vec<Entity>,
}

/// A message the bot sent, as it stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotMessage {
    /// The message id (per chat, shared with user messages).
    pub message_id: i64,
    /// The current text (after edits), exactly as sent: markup is not rendered.
    pub text: String,
    /// The forum topic it went to (`None` in the General topic and in non-forum chats).
    pub thread_id: Option<i64>,
    /// The message it explicitly replied to (`reply_parameters` / `reply_to_message_id`).
    pub reply_to: Option<i64>,
    /// How many successful edits it had.
    pub edits: usize,
    /// Whether `deleteMessage` removed it.
    pub deleted: bool,
    /// The `parse_mode` of its last send or edit.
    pub parse_mode: Option<String>,
    /// Its inline keyboard's buttons, row by row, as (label, callback data); empty when it
    /// has none (an edit without `reply_markup` removes them, as Telegram does).
    pub buttons: Vec<(String, String)>,
}

/// One authorized call to the Bot API, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The method name in lowercase (`sendmessage`, `getupdates`, ...).
    pub method: String,
    /// The parameters as a JSON object (form and query parameters become string values; an
    /// unparsable body is kept as a JSON string of its text).
    pub body: Value,
}

/// A `sendChatAction` the bot made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAction {
    /// The action, e.g. `typing`.
    pub action: String,
    /// The `message_thread_id` given (1 is allowed here).
    pub thread_id: Option<i64>,
}

/// A bot command as set by `setMyCommands`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotCommand {
    /// The command without `/`.
    pub command: String,
    /// Its description.
    pub description: String,
}

/// A forum topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForumTopic {
    /// The topic id (`message_thread_id`), the id of its creation service message.
    pub message_thread_id: i64,
    /// The topic name.
    pub name: String,
    /// The icon color (RGB).
    pub icon_color: i64,
}

/// What the fake saw of `getUpdates` pollers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pollers {
    /// `getUpdates` requests in flight now (0 or 1).
    pub in_flight: usize,
    /// The most `getUpdates` requests ever in flight at once, counting rejected ones (2 means
    /// a second poller came while one was waiting).
    pub max_concurrent: usize,
    /// All `getUpdates` requests so far.
    pub total: usize,
    /// How many were rejected with 409 Conflict.
    pub conflicts: usize,
}

/// A rate: at most `max` accepted sends and edits in any window of `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// How many calls a window admits.
    pub max: u32,
    /// The sliding window.
    pub per: Duration,
}

impl Rate {
    /// `max` per `per`.
    pub fn new(max: u32, per: Duration) -> Rate {
        Rate { max, per }
    }

    /// `max` per second.
    pub fn per_second(max: u32) -> Rate {
        Rate::new(max, Duration::from_secs(1))
    }

    /// `max` per minute.
    pub fn per_minute(max: u32) -> Rate {
        Rate::new(max, Duration::from_secs(60))
    }
}

/// The rate limits applied when
/// [`FakeTelegram::enforce_rate_limits`](super::FakeTelegram::enforce_rate_limits) is on.
/// Only `sendMessage` and `editMessageText` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Per private chat; default 1 per second.
    pub private_chat: Rate,
    /// Per group, supergroup or channel; default 20 per minute.
    pub group_chat: Rate,
    /// Over all chats of the bot; default 30 per second.
    pub bot_total: Rate,
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            private_chat: Rate::per_second(1),
            group_chat: Rate::per_minute(20),
            bot_total: Rate::per_second(30),
        }
    }
}
