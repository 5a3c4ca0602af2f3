//! The typed configuration tables and their defaults.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ParseEnumError;
use super::built::not_built;

/// The whole `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[store]`: the embedded database.
    pub store: StoreConfig,
    /// `[model]`: the model provider.
    pub model: ModelConfig,
    /// `[agent]`: the agent's identity, workspace and limits.
    pub agent: AgentConfig,
    /// `[tools]`: tool limits.
    pub tools: super::tools::ToolsConfig,
    /// `[session]`: how conversations map to sessions.
    pub session: SessionConfig,
    /// `[queue]`: what happens to messages that arrive during a run.
    pub queue: QueueConfig,
    /// `[terminal]`: the `chela chat` channel.
    pub terminal: TerminalConfig,
    /// `[channels.*]`: platform channels.
    pub channels: super::platforms::ChannelsConfig,
    /// `[commands]`: who may run admin commands.
    pub commands: super::channels::CommandsConfig,
    /// `[acp]`: coding agents over ACP.
    pub acp: super::acp::AcpConfig,
    /// `[hooks]`: commands run around tool calls and runs.
    pub hooks: super::hooks::HooksConfig,
    /// `[rpc]`: the gateway API over WebSocket.
    pub rpc: super::rpc::RpcConfig,
    /// `[delivery]`: how long final replies are worth delivering.
    pub delivery: super::delivery::DeliveryConfig,
    /// `[cluster]`: several gateways on one PostgreSQL store.
    pub cluster: super::cluster::ClusterConfig,
    /// `[media]`: files that come with chat messages.
    pub media: super::media::MediaConfig,
    /// `[log]`: a log file besides stderr, rotated by size.
    pub log: super::log::LogConfig,
    /// `[mcp]`: MCP servers whose tools the agent uses.
    pub mcp: super::mcp::McpConfig,
    /// `[memory]`: durable notes in the workspace and the flush before a compaction.
    pub memory: super::memory::MemoryConfig,
    /// `[tts]`: final answers spoken and sent as voice notes.
    pub tts: super::tts::TtsConfig,
    /// `[[cron]]`: scheduled jobs kept in the config.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cron: Vec<super::cron::CronEntry>,
    /// `[heartbeat]`: a periodic turn that reads `HEARTBEAT.md`.
    pub heartbeat: super::cron::HeartbeatConfig,
    /// `[[agents]]`: more agents beside `[agent]` (the default one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<super::agents::AgentEntry>,
    /// `[[bindings]]`: which chats go to which agent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<super::agents::Binding>,
    /// `[providers.NAME]`: model providers by name; models are then named `NAME/model`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, super::providers::ProviderEntry>,
    /// `[pricing.MODEL]`: what models cost, before the built-in prices.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pricing: BTreeMap<String, super::pricing::PriceEntry>,
    /// The folder the config file is in (relative paths were resolved against it); set by
    /// loading, never read from the file. The exec sandbox keeps it out of reach.
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
    /// The config file this was loaded from (`None`: the embedded defaults); set by loading,
    /// never read from the file. Hooks and coding agents cannot read it under their sandbox.
    #[serde(skip)]
    pub config_file: Option<std::path::PathBuf>,
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// The sled folder, `~/.chela/data` by default wherever the config file is (adding a
    /// config file must not move the store); a relative path set in the file is relative to
    /// the file's folder.
    pub path: PathBuf,
    /// Open the store even when it has rolled back (`--accept-store-rollback`; never read
    /// from the file).
    #[serde(skip)]
    pub accept_rollback: bool,
    /// The most memory the store's page cache may use, in MiB (at least 1; sled and redb).
    pub cache_mb: u64,
    /// The embedded engine: `redb`, `sled`, or `auto` (the default: sled when the folder
    /// already holds a sled store, else redb). Env `CHELA_STORE_ENGINE` overrides it;
    /// `store.url` wins over both.
    pub engine: StoreEngine,
    /// Whether [`StoreConfig::engine`] came from `CHELA_STORE_ENGINE` (never read from the
    /// file).
    #[serde(skip)]
    pub engine_from_env: bool,
    /// A PostgreSQL URL (`postgres://user:password@host:port/db`): when set, the store lives
    /// there instead of the sled folder. Env `CHELA_STORE_URL` overrides it.
    pub url: String,
    /// Whether [`StoreConfig::url`] came from `CHELA_STORE_URL` (never read from the file).
    #[serde(skip)]
    pub url_from_env: bool,
}

/// `[store] engine`: which embedded engine holds the store folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreEngine {
    /// sled when the folder already holds a sled store, else redb.
    #[default]
    Auto,
    /// redb: one file, `<store.path>/chela.redb`.
    Redb,
    /// sled: the folder is a sled database.
    Sled,
}

impl StoreEngine {
    /// The name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            StoreEngine::Auto => "auto",
            StoreEngine::Redb => "redb",
            StoreEngine::Sled => "sled",
        }
    }

    /// Parses a name as written in the config (`None`: not an engine).
    pub fn parse(name: &str) -> Option<StoreEngine> {
        match name.trim() {
            "auto" => Some(StoreEngine::Auto),
            "redb" => Some(StoreEngine::Redb),
            "sled" => Some(StoreEngine::Sled),
            _ => None,
        }
    }
}

impl StoreConfig {
    /// Where [`StoreConfig::engine`] was set, for error messages: `CHELA_STORE_ENGINE` or
    /// `store.engine`.
    pub fn engine_setting(&self) -> &'static str {
        if self.engine_from_env {
            "CHELA_STORE_ENGINE"
        } else {
            "store.engine"
        }
    }

    /// Where [`StoreConfig::url`] was set, for error messages: `CHELA_STORE_URL` or
    /// `store.url`.
    pub fn url_setting(&self) -> &'static str {
        if self.url_from_env {
            "CHELA_STORE_URL"
        } else {
            "store.url"
        }
    }

    /// Where the store is, fit to print: the PostgreSQL URL with its secrets hidden, or the
    /// sled folder.
    pub fn describe(&self) -> String {
        if self.is_postgres() {
            super::redact::redact_url(self.url.trim(), false)
        } else {
            self.path.display().to_string()
        }
    }

    /// Whether the store is PostgreSQL (a URL is set) rather than sled.
    pub fn is_postgres(&self) -> bool {
        !self.url.trim().is_empty()
    }

    /// Refuses a store this build cannot open, naming the setting and the cargo feature:
    /// `store.url` without `postgres`, `store.engine = "sled"` without `sled`.
    pub fn check_built(&self) -> Result<(), (String, String)> {
        if !cfg!(feature = "postgres") && self.is_postgres() {
            let message = not_built("the PostgreSQL store", "postgres");
            return Err((self.url_setting().to_owned(), message));
        }
        if !cfg!(feature = "sled") && self.engine == StoreEngine::Sled {
            let message = not_built("the sled engine", "sled");
            return Err((self.engine_setting().to_owned(), message));
        }
        Ok(())
    }

    /// [`StoreConfig::cache_mb`] in bytes.
    pub fn cache_bytes(&self) -> u64 {
        self.cache_mb.max(1).saturating_mul(1024 * 1024)
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("~/.chela/data"),
            accept_rollback: false,
            cache_mb: 4,
            engine: StoreEngine::Auto,
            engine_from_env: false,
            url: String::new(),
            url_from_env: false,
        }
    }
}

/// Which wire format the model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions server.
    #[default]
    OpenAi,
    /// The OpenAI Responses API (reasoning models; reasoning summaries).
    Responses,
    /// The Anthropic Messages API.
    Anthropic,
    /// Echoes the prompt back; for tests and offline use.
    Echo,
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// `openai` | `anthropic` | `echo`.
    pub provider: ProviderKind,
    /// API base URL; empty: `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, else the provider default.
    pub base_url: String,
    /// API key; empty: `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
    pub api_key: String,
    /// Model name (`NAME/model` for a `[providers.NAME]` entry); empty: the provider's
    /// default model.
    pub model: String,
    /// Models tried in order when a call of `model` fails for a reason another model could
    /// fix (rate limits past the retries, 5xx, overload, timeouts, refused connections,
    /// rejected keys); each `provider/model` or a model of `model`'s provider.
    pub fallbacks: Vec<String>,
    /// Most output tokens per model call.
    pub max_tokens: u32,
    /// Seconds without a streamed byte before a model call is abandoned.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub idle_timeout_s: u64,
    /// Retries of a failed model call (retryable errors only).
    pub max_retries: u32,
    /// The model's context window in tokens; compaction keeps prompts below it minus
    /// `agent.compaction_reserve_tokens`. 0 turns compaction off.
    pub context_window: u64,
    /// The models `/model` may switch a session to (same provider); empty: any name.
    pub models: Vec<String>,
    /// Whether pictures go to the model as images: `auto` (the known vision models), `on`,
    /// `off` (a note with the file's path instead).
    pub vision: super::media::Vision,
    /// How much the model reasons by default: `off`, `minimal`, `low`, `medium`, `high`
    /// (a session's `/think` overrides it).
    pub thinking: Thinking,
    /// Whether calls ask the provider to cache their stable prefix (Anthropic's
    /// `cache_control` marks; a `prompt_cache_key` on OpenAI's own API).
    pub prompt_cache: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: ProviderKind::OpenAi,
            base_url: String::new(),
            api_key: String::new(),
            model: String::new(),
            fallbacks: Vec::new(),
            max_tokens: 4096,
            idle_timeout_s: 120,
            max_retries: 3,
            context_window: 128_000,
            models: Vec::new(),
            vision: super::media::Vision::Auto,
            thinking: Thinking::Off,
            prompt_cache: true,
        }
    }
}

/// `[agent]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Agent id, `[a-z0-9][a-z0-9_-]{0,63}`; the second part of every session key.
    pub id: String,
    /// The agent's working folder; file tools stay inside it.
    pub workspace: PathBuf,
    /// Seconds a run may take before it is aborted.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub timeout_s: u64,
    /// The first line of the system prompt.
    pub identity: String,
    /// Global limit on concurrent runs; 0: 64.
    pub max_concurrent_runs: usize,
    /// Chars kept of each workspace bootstrap file (AGENTS.md, SOUL.md, ...).
    pub bootstrap_max_chars: usize,
    /// Chars kept of all bootstrap files together.
    pub bootstrap_total_max_chars: usize,
    /// Extra skill folders, searched after the bundled skills.
    pub skills_dirs: Vec<PathBuf>,
    /// Only these skills (by name) are offered; empty: every skill found.
    pub skills: Vec<String>,
    /// Only these `[mcp.servers]` (by name) give it tools; unset: every server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
    /// Tokens of `model.context_window` kept free for the answer: a prompt estimated above
    /// the window minus this is compacted first.
    pub compaction_reserve_tokens: u64,
    /// Skills installed for every workspace; searched after `<workspace>/skills`, before the
    /// bundled skills.
    pub managed_skills_dir: PathBuf,
    /// Seconds `chela gateway` lets runs going on finish after SIGTERM or Ctrl-C before it
    /// stops them (they then run again at the next start); 0: stop them at once.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub shutdown_grace_s: u64,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            id: "main".to_owned(),
            workspace: PathBuf::from("~/.chela/workspace"),
            timeout_s: 600,
            identity: "You are chela, a helpful assistant reachable from chat.".to_owned(),
            max_concurrent_runs: 0,
            bootstrap_max_chars: 20_000,
            bootstrap_total_max_chars: 150_000,
            skills_dirs: Vec::new(),
            skills: Vec::new(),
            mcp: None,
            compaction_reserve_tokens: 20_000,
            managed_skills_dir: PathBuf::from("~/.chela/skills"),
            shutdown_grace_s: 10,
        }
    }
}

pub use crate::domain::session_key::DmScope;

/// `[session]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// How direct messages map to sessions.
    pub dm_scope: DmScope,
    /// Canonical peer -> its platform identities (`"channel:peer_id"`); unused with `main`.
    pub identity_links: BTreeMap<String, Vec<String>>,
}

/// What a message arriving during a run does (SPEC 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// Injected into the running turn before its next model call.
    #[default]
    Steer,
    /// Its own turn after the current one.
    Followup,
    /// Merged with the other queued messages into one turn after a quiet window.
    Collect,
    /// Aborts the active run, then runs the newest message.
    Interrupt,
}

/// What happens when a session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DropPolicy {
    /// Drop the oldest and add a one-line summary of it as a synthetic turn.
    #[default]
    Summarize,
    /// Drop the oldest.
    Old,
    /// Reject the incoming message and tell the sender.
    New,
}

named_enum!(QueueMode, "queue mode", [
    Steer => "steer", Followup => "followup", Collect => "collect", Interrupt => "interrupt",
]);
named_enum!(DropPolicy, "drop policy", [Summarize => "summarize", Old => "old", New => "new"]);
named_enum!(DmScope, "dm scope", [
    Main => "main", PerPeer => "per-peer", PerChannelPeer => "per-channel-peer",
    PerAccountChannelPeer => "per-account-channel-peer",
]);
named_enum!(ProviderKind, "model provider", [
    OpenAi => "openai", Responses => "responses", Anthropic => "anthropic", Echo => "echo",
]);
named_enum!(Thinking, "thinking level", [
    Off => "off", Minimal => "minimal", Low => "low", Medium => "medium", High => "high",
]);

/// How much a model reasons before it answers (`/think`, `[model] thinking`): OpenAI's
/// `reasoning_effort` / the Responses API's `reasoning.effort`, Anthropic's thinking budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// No reasoning asked for (the model's own default where it always reasons).
    #[default]
    Off,
    /// The least.
    Minimal,
    /// A little.
    Low,
    /// Some.
    Medium,
    /// The most.
    High,
}

/// `[queue]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Default queue mode (a session's `/queue` setting overrides it).
    pub mode: QueueMode,
    /// Quiet window of `collect` mode, in milliseconds.
    #[serde(deserialize_with = "super::lenient::millis")]
    pub debounce_ms: u64,
    /// Most pending messages per session.
    pub cap: usize,
    /// What to drop when `cap` is reached.
    pub drop: DropPolicy,
    /// Largest `cap` a chat's `/queue cap:N` may set (never below `cap`).
    pub max_cap: usize,
    /// Longest quiet window a chat's `/queue debounce:` may set, in milliseconds (never below
    /// `debounce_ms`).
    #[serde(deserialize_with = "super::lenient::millis")]
    pub max_debounce_ms: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            mode: QueueMode::Steer,
            debounce_ms: 500,
            cap: 20,
            drop: DropPolicy::Summarize,
            max_cap: 100,
            max_debounce_ms: 10_000,
        }
    }
}

/// The bounds of what `/queue` may set in a chat (from `[queue]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Largest cap.
    pub cap: usize,
    /// Longest debounce.
    pub debounce: std::time::Duration,
}

impl QueueConfig {
    /// What `/queue` may set: up to `max_cap` and `max_debounce_ms`, or the operator's own
    /// `cap` and `debounce_ms` when those are larger.
    pub fn limits(&self) -> QueueLimits {
        QueueLimits {
            cap: self.max_cap.max(self.cap),
            debounce: std::time::Duration::from_millis(self.max_debounce_ms.max(self.debounce_ms)),
        }
    }
}

/// `[terminal]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerminalConfig {
    /// The sender id of terminal messages; empty: `$USER`, else `local`.
    pub user: String,
    /// `chela chat` on a terminal shows a line per tool call of chela's agent.
    pub tool_progress: bool,
    /// A chat on a terminal shows the tokens each turn used (in, out, cached) and how full the
    /// context window is; `/usage` switches it on and off there.
    pub usage: bool,
}

impl Default for TerminalConfig {
    fn default() -> Self {
        TerminalConfig {
            user: String::new(),
            tool_progress: true,
            usage: false,
        }
    }
}

impl TerminalConfig {
    /// The terminal user: `user`, else `$USER`, else `local`.
    pub fn resolved_user(&self) -> String {
        if !self.user.is_empty() {
            return self.user.clone();
        }
        std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "local".to_owned())
    }
}
