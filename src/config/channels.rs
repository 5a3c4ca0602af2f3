//! `[channels.*]` and `[commands]`: platform channels and who may do what on them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ParseEnumError;

/// Who may message the bot directly (SPEC 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmPolicy {
    /// Unknown senders get a pairing code; the owner approves with `chela pairing approve`.
    #[default]
    Pairing,
    /// Only `allow_from` senders.
    Allowlist,
    /// Everyone (`allow_from = ["*"]` is implied).
    Open,
    /// No direct messages.
    Disabled,
}

/// Who may talk to the bot in groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Only `group_allow_from` (else `allow_from`) senders.
    #[default]
    Allowlist,
    /// Every member.
    Open,
}

/// How replies appear while they are generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Streaming {
    /// One message when the answer is complete.
    Off,
    /// One message edited as the text grows.
    #[default]
    Partial,
    /// Finished blocks (800 to 1200 chars) sent as separate messages, never edited.
    Block,
}

named_enum!(DmPolicy, "dm policy", [
    Pairing => "pairing", Allowlist => "allowlist", Open => "open", Disabled => "disabled",
]);
named_enum!(GroupPolicy, "group policy", [Allowlist => "allowlist", Open => "open"]);
named_enum!(Streaming, "streaming", [Off => "off", Partial => "partial", Block => "block"]);

/// Admission rules shared by every platform channel (each channel's table carries these keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    /// Direct-message policy.
    pub dm_policy: DmPolicy,
    /// Sender ids allowed to message the bot directly (`"*"`: everyone).
    pub allow_from: Vec<String>,
    /// Group policy.
    pub group_policy: GroupPolicy,
    /// Sender ids allowed in groups; empty: `allow_from`.
    pub group_allow_from: Vec<String>,
    /// In groups, only messages that mention the bot (or reply to it) are answered.
    pub require_mention: bool,
    /// Extra case-insensitive words that count as a mention in groups (e.g. "chela").
    pub mention_patterns: Vec<String>,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            dm_policy: DmPolicy::Pairing,
            allow_from: Vec::new(),
            group_policy: GroupPolicy::Allowlist,
            group_allow_from: Vec::new(),
            require_mention: true,
            mention_patterns: Vec::new(),
        }
    }
}

/// `[channels.telegram]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// Bot token from BotFather; empty: env `TELEGRAM_BOT_TOKEN`; the channel starts when set.
    pub token: String,
    /// Bot API base URL; env `CHELA_TELEGRAM_API_URL` overrides it.
    pub api_url: String,
    /// Account id in session keys (several bots: one account each).
    pub account: String,
    /// Long-poll timeout of getUpdates, in seconds.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub poll_timeout_s: u64,
    /// How replies stream.
    pub streaming: Streaming,
    /// Direct-message policy: pairing | allowlist | open | disabled.
    pub dm_policy: DmPolicy,
    /// Sender ids allowed to message the bot directly (`"*"`: everyone).
    #[serde(deserialize_with = "super::lenient::ids")]
    pub allow_from: Vec<String>,
    /// Group policy: allowlist | open.
    pub group_policy: GroupPolicy,
    /// Sender ids allowed in groups; empty: `allow_from`.
    #[serde(deserialize_with = "super::lenient::ids")]
    pub group_allow_from: Vec<String>,
    /// In groups, only messages that mention the bot (or reply to it) are answered.
    pub require_mention: bool,
    /// Extra case-insensitive words that count as a mention in groups.
    pub mention_patterns: Vec<String>,
    /// Public HTTPS URL Telegram should POST updates to; empty: long polling.
    pub webhook_url: String,
    /// Local address the webhook listener binds (put a TLS proxy in front of it).
    pub webhook_listen: String,
    /// Secret Telegram sends with every webhook update; empty: a random one per start.
    pub webhook_secret: String,
}

impl TelegramConfig {
    /// The admission rules of this channel.
    pub fn access(&self) -> AccessConfig {
        AccessConfig {
            dm_policy: self.dm_policy,
            allow_from: self.allow_from.clone(),
            group_policy: self.group_policy,
            group_allow_from: self.group_allow_from.clone(),
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
        }
    }
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            token: String::new(),
            api_url: "https://api.telegram.org".into(),
            account: "default".into(),
            poll_timeout_s: 25,
            streaming: Streaming::Partial,
            dm_policy: DmPolicy::Pairing,
            allow_from: Vec::new(),
            group_policy: GroupPolicy::Allowlist,
            group_allow_from: Vec::new(),
            require_mention: true,
            mention_patterns: Vec::new(),
            webhook_url: String::new(),
            webhook_listen: "127.0.0.1:8787".into(),
            webhook_secret: String::new(),
        }
    }
}

/// `[channels.discord]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordConfig {
    /// Bot token; empty: env `DISCORD_BOT_TOKEN`; the channel starts when set.
    pub token: String,
    /// REST base URL (serenity proxy); a non-default value also turns serenity's ratelimiter
    /// off and chela paces itself. Env `CHELA_DISCORD_API_URL` overrides it.
    pub api_url: String,
    /// Gateway URL; empty: ask the REST API. Env `CHELA_DISCORD_GATEWAY_URL` overrides it.
    pub gateway_url: String,
    /// Account id in session keys.
    pub account: String,
    /// How replies stream.
    pub streaming: Streaming,
    /// Direct-message policy: pairing | allowlist | open | disabled.
    pub dm_policy: DmPolicy,
    /// User ids allowed to message the bot directly (`"*"`: everyone).
    #[serde(deserialize_with = "super::lenient::ids")]
    pub allow_from: Vec<String>,
    /// Who may talk in guild channels: allowlist | open.
    pub group_policy: GroupPolicy,
    /// User ids allowed in guild channels; empty: `allow_from`.
    #[serde(deserialize_with = "super::lenient::ids")]
    pub group_allow_from: Vec<String>,
    /// In guild channels, only messages that mention the bot (or reply to it) are answered.
    pub require_mention: bool,
    /// Extra case-insensitive words that count as a mention.
    pub mention_patterns: Vec<String>,
    /// Guild ids whose messages are taken; empty: every guild the bot is in.
    pub guilds: Vec<u64>,
    /// Channel ids whose messages are taken (a thread counts as its parent); empty: all.
    pub channels: Vec<u64>,
    /// Role ids whose members may /new, /reset and /stop in guild channels (besides the
    /// guild owner and administrators).
    pub admin_roles: Vec<u64>,
    /// Largest file the bot attaches, in MiB: 10 on a server without boosts (Discord's
    /// current limit for bots there); raise it for boosted servers (50 or 100).
    pub upload_mb: u64,
    /// Gateway shards (0 counts as 1): shard `id` gets the events of the guilds with
    /// `(guild_id >> 22) % shards == id`, DMs on shard 0. On a cluster each shard is an
    /// intake lease of its own, so the nodes share them.
    pub shards: u32,
}

/// The most `channels.discord.shards` chela takes (Discord wants one shard per 2,500 guilds at
/// most, so this covers 2.5 million guilds).
pub const MAX_DISCORD_SHARDS: u32 = 1024;

impl DiscordConfig {
    /// How many gateway shards run (`shards`, 0 counting as 1).
    pub fn shard_count(&self) -> u32 {
        self.shards.max(1)
    }

    /// The admission rules of this channel.
    pub fn access(&self) -> AccessConfig {
        AccessConfig {
            dm_policy: self.dm_policy,
            allow_from: self.allow_from.clone(),
            group_policy: self.group_policy,
            group_allow_from: self.group_allow_from.clone(),
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
        }
    }
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            token: String::new(),
            api_url: "https://discord.com".into(),
            gateway_url: String::new(),
            account: "default".into(),
            streaming: Streaming::Partial,
            dm_policy: DmPolicy::Pairing,
            allow_from: Vec::new(),
            group_policy: GroupPolicy::Allowlist,
            group_allow_from: Vec::new(),
            require_mention: true,
            mention_patterns: Vec::new(),
            guilds: Vec::new(),
            channels: Vec::new(),
            admin_roles: Vec::new(),
            upload_mb: 10,
            shards: 1,
        }
    }
}

/// Who may switch a conversation's model with `/model NAME` (`[commands] model`, SPEC 2).
/// Showing the model and `/model default` are for everyone who may run commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelChange {
    /// Owners only.
    Owner,
    /// Owners any model; others only the names of `[model] models` (so owners only while
    /// that list is empty).
    #[default]
    Listed,
    /// Everyone who may run commands (limited to `[model] models` when that list is set).
    Everyone,
}

named_enum!(ModelChange, "model change", [
    Owner => "owner", Listed => "listed", Everyone => "everyone",
]);

impl ModelChange {
    /// Whether senders who are not owners may switch models, given `[model] models`.
    pub fn open_to_others(self, models: &[String]) -> bool {
        match self {
            ModelChange::Owner => false,
            ModelChange::Listed => !models.is_empty(),
            ModelChange::Everyone => true,
        }
    }
}

/// `[commands]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommandsConfig {
    /// Owners as `channel:sender_id` (e.g. `telegram:42`): they may /new, /reset and /stop
    /// in groups. Empty: the first sender approved by pairing becomes the owner; set, it is
    /// the only source of owners (pairing never makes one).
    pub owner_allow_from: Vec<String>,
    /// When not empty, the only senders (`channel:sender_id`, or `*`) whose commands are
    /// taken; everyone else's are ignored (inline, they stay plain text). The terminal and
    /// the RPC are not limited by it.
    pub allow_from: Vec<String>,
    /// Who may switch a conversation's model with `/model NAME`: owner | listed | everyone.
    pub model: ModelChange,
}

impl CommandsConfig {
    /// Whether pairing may make owners: only while no owner is configured (any channel).
    /// With `owner_allow_from` set, it is the only source of owners.
    pub fn pairing_makes_owners(&self) -> bool {
        self.owner_allow_from.is_empty()
    }
}
