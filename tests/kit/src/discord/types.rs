//! The plain data types of the fake Discord: how tests describe channels, users and messages,
//! and what they read back (bot messages, calls, threads).

use serde_json::{Value, json};

/// The kind of a Discord channel the fake knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// A guild text channel (`type` 0).
    GuildText,
    /// A direct message channel (`type` 1), without a guild.
    Dm,
    /// A public thread (`type` 11) under a guild text channel.
    PublicThread,
    /// A private thread (`type` 12) under a guild text channel.
    PrivateThread,
}

impl ChannelKind {
    /// Discord's channel `type` number.
    pub fn type_id(self) -> u8 {
        match self {
            ChannelKind::GuildText => 0,
            ChannelKind::Dm => 1,
            ChannelKind::PublicThread => 11,
            ChannelKind::PrivateThread => 12,
        }
    }

    /// Whether this is a thread (public or private).
    pub fn is_thread(self) -> bool {
        matches!(self, ChannelKind::PublicThread | ChannelKind::PrivateThread)
    }
}

/// A channel as tests name it. Channels become known through
/// [`FakeDiscord::add_channel`](super::FakeDiscord::add_channel), the first simulated user
/// message in them, or the bot creating them (threads, DMs); REST calls naming an unknown
/// channel get 404 `{"code":10003,"message":"Unknown Channel"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// The channel (or thread) id.
    pub id: u64,
    /// What kind of channel it is.
    pub kind: ChannelKind,
    /// The guild, for guild channels and threads.
    pub guild_id: Option<u64>,
    /// The parent text channel, for threads.
    pub parent_id: Option<u64>,
    /// The channel or thread name (`general`, `thread-<id>` unless set).
    pub name: Option<String>,
}

impl ChannelSpec {
    /// A text channel `channel_id` in guild `guild_id`.
    pub fn guild_text(guild_id: u64, channel_id: u64) -> ChannelSpec {
        ChannelSpec {
            id: channel_id,
            kind: ChannelKind::GuildText,
            guild_id: Some(guild_id),
            parent_id: None,
            name: None,
        }
    }

    /// A direct-message channel with the bot; its recipient is the first user who writes in it.
    pub fn dm(channel_id: u64) -> ChannelSpec {
        ChannelSpec {
            id: channel_id,
            kind: ChannelKind::Dm,
            guild_id: None,
            parent_id: None,
            name: None,
        }
    }

    /// A public thread `thread_id` under text channel `parent_id` of guild `guild_id`. A thread
    /// the fake did not know yet is announced with `THREAD_CREATE` (owner: its first author).
    pub fn thread(guild_id: u64, thread_id: u64, parent_id: u64) -> ChannelSpec {
        ChannelSpec {
            id: thread_id,
            kind: ChannelKind::PublicThread,
            guild_id: Some(guild_id),
            parent_id: Some(parent_id),
            name: None,
        }
    }

    /// The same channel with a name.
    pub fn named(mut self, name: &str) -> ChannelSpec {
        self.name = Some(name.to_owned());
        self
    }

    /// The name it is shown with: the given one, else `general` for text channels and
    /// `thread-<id>` for threads (DMs have none).
    pub fn display_name(&self) -> String {
        match (&self.name, self.kind) {
            (Some(name), _) => name.clone(),
            (None, ChannelKind::GuildText) => "general".to_owned(),
            (None, _) => format!("thread-{}", self.id),
        }
    }
}

/// A simulated (human, unless [`UserSpec::bot`]) Discord user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSpec {
    /// The user id (a snowflake).
    pub id: u64,
    /// The unique username (lowercase, no `#`).
    pub username: String,
    /// The display name (`global_name`), if any.
    pub global_name: Option<String>,
    /// Whether the user is a bot.
    pub bot: bool,
}

impl UserSpec {
    /// A human user without a display name.
    pub fn new(id: u64, username: &str) -> UserSpec {
        UserSpec {
            id,
            username: username.to_owned(),
            global_name: None,
            bot: false,
        }
    }

    /// The same user with a display name (`global_name`).
    pub fn with_global_name(mut self, global_name: &str) -> UserSpec {
        self.global_name = Some(global_name.to_owned());
        self
    }

    /// The same user marked as a bot (`"bot": true`).
    pub fn bot(mut self) -> UserSpec {
        self.bot = true;
        self
    }

    /// The Discord `User` object (`discriminator` `"0"`, as for migrated usernames).
    pub fn to_json(&self) -> Value {
        let mut user = json!({
            "id": self.id.to_string(),
            "username": self.username,
            "discriminator": "0",
            "global_name": self.global_name,
            "avatar": null,
            "public_flags": 0,
        });
        if self.bot {
            user["bot"] = json!(true);
        }
        user
    }
}

/// A file attached to a simulated user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentSpec {
    /// The file name.
    pub filename: String,
    /// The size in bytes.
    pub size: u64,
    /// The MIME type, if known.
    pub content_type: Option<String>,
    /// The bytes the fake serves at the attachment's URL (`None`: the URL answers 404).
    pub data: Option<Vec<u8>>,
}

impl AttachmentSpec {
    /// An attachment `filename` of `size` bytes.
    pub fn new(filename: &str, size: u64) -> AttachmentSpec {
        AttachmentSpec {
            filename: filename.to_owned(),
            size,
            content_type: None,
            data: None,
        }
    }

    /// An attachment `filename` of type `content_type` whose URL serves `data` (its size).
    pub fn served(filename: &str, content_type: &str, data: Vec<u8>) -> AttachmentSpec {
        AttachmentSpec {
            filename: filename.to_owned(),
            size: data.len() as u64,
            content_type: Some(content_type.to_owned()),
            data: Some(data),
        }
    }
}

/// Options for [`FakeDiscord::user_sends_with`](super::FakeDiscord::user_sends_with).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageOptions {
    /// Mention the bot: it goes into `mentions`, and the content gets a `<@BOT_ID> ` prefix
    /// unless it already holds `<@BOT_ID>` or `<@!BOT_ID>`. (A `<@BOT_ID>` typed into the
    /// content counts as a mention even without this.)
    pub mentions_bot: bool,
    /// Reply to this message of the same channel: `type` 19, `message_reference` and the full
    /// `referenced_message`; its author goes into `mentions` unless
    /// [`MessageOptions::reply_without_ping`]. An unknown id is ignored.
    pub referenced_message_id: Option<u64>,
    /// Reply without pinging the replied-to author.
    pub reply_without_ping: bool,
    /// Further users in `mentions` (their `<@id>` is not added to the content).
    pub mentions: Vec<UserSpec>,
    /// Sets `mention_everyone`.
    pub mention_everyone: bool,
    /// Role ids in `mention_roles` (their `<@&id>` is prepended to the content).
    pub mention_roles: Vec<u64>,
    /// Attachments (`cdn` URLs on the fake's host that do not serve anything).
    pub attachments: Vec<AttachmentSpec>,
}

/// A message the bot sent, as it stands now.
#[derive(Debug, Clone, PartialEq)]
pub struct BotMessage {
    /// The message id.
    pub id: u64,
    /// The channel (or thread) it is in.
    pub channel_id: u64,
    /// The current content, after edits.
    pub content: String,
    /// How many successful edits it had.
    pub edits: usize,
    /// Whether it was deleted.
    pub deleted: bool,
    /// The `nonce` it was sent with (numbers as their decimal text).
    pub nonce: Option<String>,
    /// The message it replied to (`message_reference.message_id`).
    pub reference: Option<u64>,
    /// The `allowed_mentions` of its last send or edit.
    pub allowed_mentions: Option<Value>,
    /// Its current embeds.
    pub embeds: Vec<Value>,
    /// The file names it was sent with (multipart uploads).
    pub attachments: Vec<String>,
    /// Its buttons now, row by row, as (label, custom_id); empty when it has none (an edit
    /// with `components: []` removes them; one that does not name them keeps them, as
    /// Discord does).
    pub buttons: Vec<(String, String)>,
    /// Its string select menu now, if any: the menu's `custom_id` and its options as
    /// (label, value); `None` when it has none.
    pub menu: Option<(String, Vec<(String, String)>)>,
}

/// One authorized REST call, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The HTTP method in uppercase (`POST`).
    pub method: String,
    /// The path after the `/api/v10` prefix, e.g. `/channels/1/messages`.
    pub path: String,
    /// The raw query string (without `?`), if any.
    pub query: Option<String>,
    /// The JSON body (a multipart upload's `payload_json`), `Null` if there was none; a body
    /// that is not JSON is kept as a JSON string of its text.
    pub body: Value,
}

/// A thread the fake knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    /// The thread id (equal to the starter message id for threads made from a message).
    pub id: u64,
    /// Its guild.
    pub guild_id: u64,
    /// The text channel it belongs to.
    pub parent_id: u64,
    /// Its name.
    pub name: String,
    /// The channel `type`: 11 public, 12 private.
    pub kind: u8,
    /// Who created it (the bot's id for threads the bot made).
    pub owner_id: u64,
    /// The message it was started from, if any.
    pub starter_message_id: Option<u64>,
    /// Whether it is archived.
    pub archived: bool,
    /// Whether it is locked.
    pub locked: bool,
}

/// A slash command a simulated user ran, and how the bot answered it so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InteractionInfo {
    /// The interaction id.
    pub id: u64,
    /// Its token (in the callback and webhook paths).
    pub token: String,
    /// The command name; for a button press, the button's `custom_id`.
    pub name: String,
    /// The interaction type: 2 a slash command, 3 a button press.
    pub kind: u8,
    /// The message whose button was pressed (presses only).
    pub message_id: Option<u64>,
    /// The channel (or thread, or DM) it was run in.
    pub channel_id: u64,
    /// Who ran it.
    pub user_id: u64,
    /// The callback `type` the bot answered with (4 a message, 5 deferred), once it did.
    pub callback_type: Option<u64>,
    /// Whether the response is ephemeral (`flags` 64 in the callback's `data`).
    pub ephemeral: bool,
    /// The original response's text: the callback's content, then the last `@original` edit.
    pub response: Option<String>,
    /// How many times `@original` was edited.
    pub edits: usize,
    /// Follow-up messages: text and whether each is ephemeral.
    pub followups: Vec<(String, bool)>,
}
