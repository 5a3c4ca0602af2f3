//! Session keys (SPEC 1.2): one builder ([`build`]), one parser ([`SessionKey::parse`]), one
//! storage-safe name ([`storage_name`], inverse [`from_storage_name`]).
//!
//! Grammar (all lowercase):
//! ```text
//! agent:<a>:main                                  dm_scope = main
//! agent:<a>:direct:<peer>                         dm_scope = per-peer
//! agent:<a>:<channel>:direct:<peer>               dm_scope = per-channel-peer (default)
//! agent:<a>:<channel>:<account>:direct:<peer>     dm_scope = per-account-channel-peer
//! agent:<a>:<channel>:group:<chat>                group chat
//! agent:<a>:<channel>:channel:<chat>              room / guild channel
//! agent:<a>:telegram:group:<chat>:topic:<topic>   Telegram forum topic
//! agent:<a>:acp:<uuid>                            ACP session
//! agent:<a>:subagent:<uuid>                       sub-agent
//! agent:<a>:cron:<job>                            a scheduled job's own (isolated) session
//! <any of the above>:thread:<id>                  thread under that conversation
//! ```
//! Components never contain `:`: the builder lowercases them and [`fmt::Display`] escapes
//! every byte outside `[a-z0-9._+@-]` as `%xx` (lowercase hex). So the thread suffix is always
//! the last two segments, which is exactly "parse by the last `:thread:`", and a channel, peer or
//! agent named `thread` cannot confuse the parser.

mod build;
mod escape;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How direct messages map to sessions (SPEC 1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmScope {
    /// Every DM shares one conversation: `agent:<a>:main`.
    Main,
    /// One conversation per person across channels: `agent:<a>:direct:<peer>`.
    PerPeer,
    /// One conversation per person and channel: `agent:<a>:<channel>:direct:<peer>`.
    #[default]
    PerChannelPeer,
    /// One per person, channel and account: `agent:<a>:<channel>:<account>:direct:<peer>`.
    PerAccountChannelPeer,
}

pub use build::{build, is_valid_agent_id, normalize_agent_id};
pub use escape::{from_storage_name, storage_name};

/// The conversation part of a session key (everything between the agent id and the thread).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyBase {
    /// `main`: every direct message shares one conversation.
    Main,
    /// `direct:<peer>`: one conversation per person across channels.
    Direct {
        /// Peer id (or the canonical peer from `session.identity_links`).
        peer: String,
    },
    /// `<channel>:direct:<peer>`: one conversation per person and channel.
    ChannelDirect {
        /// Channel name.
        channel: String,
        /// Peer id.
        peer: String,
    },
    /// `<channel>:<account>:direct:<peer>`: one per person, channel and account.
    AccountDirect {
        /// Channel name.
        channel: String,
        /// Account id.
        account: String,
        /// Peer id.
        peer: String,
    },
    /// `<channel>:group:<chat>`: a group chat.
    Group {
        /// Channel name.
        channel: String,
        /// Chat id.
        chat: String,
    },
    /// `<channel>:channel:<chat>`: a room or guild channel.
    Room {
        /// Channel name.
        channel: String,
        /// Chat id.
        chat: String,
    },
    /// `<channel>:group:<chat>:topic:<topic>`: a forum topic (Telegram).
    Topic {
        /// Channel name (`telegram`).
        channel: String,
        /// Chat id of the forum.
        chat: String,
        /// Topic id (`1` is General).
        topic: String,
    },
    /// `acp:<uuid>`: an ACP coding-agent session.
    Acp {
        /// Session uuid.
        id: String,
    },
    /// `subagent:<uuid>`: a sub-agent run.
    Subagent {
        /// Sub-agent uuid.
        id: String,
    },
    /// `cron:<job>`: the session of its own that an isolated scheduled job runs in.
    Cron {
        /// The job's id.
        id: String,
    },
}

/// A parsed session key. Fields hold unescaped values; every component must be non-empty, and
/// `agent` must satisfy [`is_valid_agent_id`], for the key to display as a parseable string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// Agent id.
    pub agent: String,
    /// The conversation.
    pub base: KeyBase,
    /// Thread id under the conversation, if any.
    pub thread: Option<String>,
}

/// Why a string is not a session key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session key {key:?}: {reason}")]
pub struct KeyError {
    /// The rejected text.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

impl KeyError {
    fn new(key: &str, reason: impl Into<String>) -> Self {
        Self {
            key: key.to_owned(),
            reason: reason.into(),
        }
    }
}

impl SessionKey {
    /// A key without a thread.
    pub fn new(agent: impl Into<String>, base: KeyBase) -> Self {
        Self {
            agent: agent.into(),
            base,
            thread: None,
        }
    }

    /// The same key under thread `id`.
    pub fn with_thread(mut self, id: impl Into<String>) -> Self {
        self.thread = Some(id.into());
        self
    }

    /// The key without its thread suffix.
    pub fn parent(&self) -> SessionKey {
        SessionKey::new(self.agent.clone(), self.base.clone())
    }

    /// The storage-safe name of this key (see [`storage_name`]).
    pub fn storage_name(&self) -> String {
        storage_name(&self.to_string())
    }

    /// Parses a session key. ASCII case is ignored; the canonical form is lowercase.
    pub fn parse(text: &str) -> Result<SessionKey, KeyError> {
        let lower = text.trim().to_ascii_lowercase();
        let segments: Vec<&str> = lower.split(':').collect();
        let (agent, mut rest) = match segments.as_slice() {
            ["agent", agent, rest @ ..] if !rest.is_empty() => (*agent, rest),
            _ => return Err(KeyError::new(text, "expected agent:<agent id>:...")),
        };
        if !is_valid_agent_id(agent) {
            return Err(KeyError::new(
                text,
                "agent id must match [a-z0-9][a-z0-9_-]{0,63}",
            ));
        }
        let mut thread = None;
        if let [base @ .., "thread", id] = rest
            && !base.is_empty()
        {
            thread = Some(escape::unescape(text, id)?);
            rest = base;
        }
        let c = |s: &str| escape::unescape(text, s);
        let base = match rest {
            ["main"] => KeyBase::Main,
            ["direct", peer] => KeyBase::Direct { peer: c(peer)? },
            ["acp", id] => KeyBase::Acp { id: c(id)? },
            ["subagent", id] => KeyBase::Subagent { id: c(id)? },
            ["cron", id] => KeyBase::Cron { id: c(id)? },
            [channel, "direct", peer] => KeyBase::ChannelDirect {
                channel: c(channel)?,
                peer: c(peer)?,
            },
            [channel, "group", chat] => KeyBase::Group {
                channel: c(channel)?,
                chat: c(chat)?,
            },
            [channel, "channel", chat] => KeyBase::Room {
                channel: c(channel)?,
                chat: c(chat)?,
            },
            [channel, account, "direct", peer] => KeyBase::AccountDirect {
                channel: c(channel)?,
                account: c(account)?,
                peer: c(peer)?,
            },
            [channel, "group", chat, "topic", topic] => KeyBase::Topic {
                channel: c(channel)?,
                chat: c(chat)?,
                topic: c(topic)?,
            },
            _ => {
                return Err(KeyError::new(
                    text,
                    "unknown shape; expected main, direct:<peer>, <channel>:direct:<peer>, \
                     <channel>:<account>:direct:<peer>, <channel>:group:<chat>[:topic:<topic>], \
                     <channel>:channel:<chat>, acp:<id>, subagent:<id> or cron:<job>, \
                     optionally followed by :thread:<id>",
                ));
            }
        };
        Ok(SessionKey {
            agent: agent.to_owned(),
            base,
            thread,
        })
    }

    /// Decodes a [`storage_name`] back to its key.
    pub fn from_storage_name(name: &str) -> Result<SessionKey, KeyError> {
        SessionKey::parse(&from_storage_name(name)?)
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = escape::Escaped;
        write!(f, "agent:{}:", e(&self.agent))?;
        match &self.base {
            KeyBase::Main => f.write_str("main")?,
            KeyBase::Direct { peer } => write!(f, "direct:{}", e(peer))?,
            KeyBase::ChannelDirect { channel, peer } => {
                write!(f, "{}:direct:{}", e(channel), e(peer))?;
            }
            KeyBase::AccountDirect {
                channel,
                account,
                peer,
            } => write!(f, "{}:{}:direct:{}", e(channel), e(account), e(peer))?,
            KeyBase::Group { channel, chat } => write!(f, "{}:group:{}", e(channel), e(chat))?,
            KeyBase::Room { channel, chat } => write!(f, "{}:channel:{}", e(channel), e(chat))?,
            KeyBase::Topic {
                channel,
                chat,
                topic,
            } => write!(f, "{}:group:{}:topic:{}", e(channel), e(chat), e(topic))?,
            KeyBase::Acp { id } => write!(f, "acp:{}", e(id))?,
            KeyBase::Subagent { id } => write!(f, "subagent:{}", e(id))?,
            KeyBase::Cron { id } => write!(f, "cron:{}", e(id))?,
        }
        if let Some(thread) = &self.thread {
            write!(f, ":thread:{}", e(thread))?;
        }
        Ok(())
    }
}

impl FromStr for SessionKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionKey::parse(s)
    }
}
