//! The plain data types of the fake Slack: how tests describe conversations and users, and
//! what they read back (the bot's messages, ephemerals, calls).

use serde_json::{Value, json};

/// The kind of a Slack conversation (its `channel_type` in message events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// A direct message with one user (`im`, id `D...`).
    Im,
    /// A public channel (`channel`, id `C...`).
    Public,
    /// A private channel (`group`, id `G...`).
    Private,
    /// A multi-person direct message (`mpim`).
    Mpim,
}

impl ChannelKind {
    /// Slack's `channel_type` of message events: `im`, `channel`, `group` or `mpim`.
    pub fn channel_type(self) -> &'static str {
        match self {
            ChannelKind::Im => "im",
            ChannelKind::Public => "channel",
            ChannelKind::Private => "group",
            ChannelKind::Mpim => "mpim",
        }
    }
}

/// A conversation as tests name it. Conversations become known through
/// [`FakeSlack::add_channel`](super::FakeSlack::add_channel), the first simulated user message
/// in them, or `conversations.open`; Web API calls naming an unknown one get
/// `channel_not_found`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// The conversation id (`C1`, `G1`, `DU1`).
    pub id: String,
    /// What kind of conversation it is.
    pub kind: ChannelKind,
    /// Its name (none for direct messages).
    pub name: Option<String>,
    /// The other party of a direct message.
    pub user: Option<String>,
}

impl ChannelSpec {
    /// The direct message with `user_id`: id `D<user_id>`.
    pub fn im(user_id: &str) -> ChannelSpec {
        ChannelSpec {
            id: format!("D{user_id}"),
            kind: ChannelKind::Im,
            name: None,
            user: Some(user_id.to_owned()),
        }
    }

    /// Public channel `id` named `name`.
    pub fn public(id: &str, name: &str) -> ChannelSpec {
        ChannelSpec {
            id: id.to_owned(),
            kind: ChannelKind::Public,
            name: Some(name.to_owned()),
            user: None,
        }
    }

    /// Private channel `id` named `name`.
    pub fn private(id: &str, name: &str) -> ChannelSpec {
        ChannelSpec {
            id: id.to_owned(),
            kind: ChannelKind::Private,
            name: Some(name.to_owned()),
            user: None,
        }
    }

    /// Multi-person direct message `id` (named `mpdm-<id>`).
    pub fn mpim(id: &str) -> ChannelSpec {
        ChannelSpec {
            id: id.to_owned(),
            kind: ChannelKind::Mpim,
            name: Some(format!("mpdm-{}", id.to_ascii_lowercase())),
            user: None,
        }
    }

    /// The `channel` object of `conversations.info` / `conversations.open`.
    pub fn to_json(&self) -> Value {
        let kind = self.kind;
        let mut channel = json!({
            "id": self.id,
            "is_im": kind == ChannelKind::Im,
            "is_mpim": kind == ChannelKind::Mpim,
            "is_private": kind != ChannelKind::Public,
            "is_channel": kind == ChannelKind::Public,
            "is_group": kind == ChannelKind::Private,
            "is_archived": false,
            "created": 1_600_000_000,
        });
        if let Some(name) = &self.name {
            channel["name"] = json!(name);
            channel["name_normalized"] = json!(name);
            channel["is_member"] = json!(true);
        }
        if let Some(user) = &self.user {
            channel["user"] = json!(user);
        }
        channel
    }
}

/// A simulated Slack user (a person unless [`UserSpec::bot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSpec {
    /// The user id (`U1`).
    pub id: String,
    /// The handle (`name`).
    pub name: String,
    /// The full name (`real_name`; the handle unless set).
    pub real_name: String,
    /// The display name (`profile.display_name`; the handle unless set).
    pub display_name: String,
    /// A workspace admin.
    pub is_admin: bool,
    /// The workspace owner.
    pub is_owner: bool,
    /// A bot user.
    pub is_bot: bool,
}

impl UserSpec {
    /// A person `id` with handle `name`.
    pub fn new(id: &str, name: &str) -> UserSpec {
        UserSpec {
            id: id.to_owned(),
            name: name.to_owned(),
            real_name: name.to_owned(),
            display_name: name.to_owned(),
            is_admin: false,
            is_owner: false,
            is_bot: false,
        }
    }

    /// The same user, a workspace admin.
    pub fn admin(mut self) -> UserSpec {
        self.is_admin = true;
        self
    }

    /// The same user, the workspace owner (and an admin).
    pub fn owner(mut self) -> UserSpec {
        self.is_owner = true;
        self.is_admin = true;
        self
    }

    /// The same user, a bot.
    pub fn bot(mut self) -> UserSpec {
        self.is_bot = true;
        self
    }

    /// The same user with full name `real_name`.
    pub fn real_name(mut self, real_name: &str) -> UserSpec {
        real_name.clone_into(&mut self.real_name);
        self
    }

    /// The same user with display name `display_name`.
    pub fn display_name(mut self, display_name: &str) -> UserSpec {
        display_name.clone_into(&mut self.display_name);
        self
    }

    /// The `user` object of `users.info`.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "team_id": super::json::TEAM_ID,
            "name": self.name,
            "real_name": self.real_name,
            "deleted": false,
            "is_admin": self.is_admin,
            "is_owner": self.is_owner,
            "is_bot": self.is_bot,
            "is_app_user": false,
            "tz": "Europe/London",
            "profile": {
                "display_name": self.display_name,
                "real_name": self.real_name,
            },
        })
    }
}

/// A message the bot posted (`chat.postMessage` or a shared upload), as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    /// The conversation.
    pub channel: String,
    /// Its `ts` (its id).
    pub ts: String,
    /// The current text.
    pub text: String,
    /// The thread it was posted in, if any.
    pub thread_ts: Option<String>,
    /// The current `blocks`, if any.
    pub blocks: Option<Value>,
    /// Whether it was a thread reply also sent to the channel (`reply_broadcast`).
    pub reply_broadcast: bool,
    /// How many `chat.update` calls changed it.
    pub edits: usize,
    /// The text set by each `chat.update`, in order (the last is `text`).
    pub edit_history: Vec<String>,
    /// The files it carries: id and name, in order.
    pub files: Vec<(String, String)>,
    /// The bot's reactions on it.
    pub reactions: Vec<String>,
    /// Whether it is pinned.
    pub pinned: bool,
}

/// An ephemeral message the bot sent (`chat.postEphemeral`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ephemeral {
    /// The conversation.
    pub channel: String,
    /// The one user who sees it.
    pub user: String,
    /// The text.
    pub text: String,
    /// The thread, if any.
    pub thread_ts: Option<String>,
    /// The `blocks`, if any.
    pub blocks: Option<Value>,
    /// The `message_ts` it was answered with.
    pub message_ts: String,
}

/// One Web API call (`/api/{method}`), recorded before authentication, rate limits and
/// validation: what arrived, whatever it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The method (`chat.postMessage`).
    pub method: String,
    /// The query string and body merged into one JSON object (form values as strings).
    pub params: Value,
}
