//! Configuration: `config.toml` -> typed [`Config`].
//!
//! Loading ([`Config::load`]) picks the file (`--config`, else `$CHELA_CONFIG`, else the platform
//! config dir, else embedded defaults), expands `${VAR}` / `${VAR:-default}` from the environment
//! (an unset `${VAR}` without a default is an error naming it and its key),
//! parses with every table closed to unknown keys, applies environment overrides
//! ([`ENV_OVERRIDES`]), resolves `~` and relative paths against the config file's folder and
//! validates cross-field rules and URLs. The store defaults to `~/.chela/data` whichever file
//! is used. Every error names the file, the dotted key, the line and column,
//! and what was expected. `config.example.toml` at the repository root lists every key with its
//! default; a test keeps it equal to [`Config::default`].

#[macro_use]
mod macros;
mod acp;
mod agents;
mod browser;
mod built;
mod channels;
mod cluster;
mod cron;
mod delivery;
mod durations;
mod env;
mod error;
mod hooks;
mod lenient;
mod log;
mod mcp;
mod mcp_names;
mod media;
mod memory;
mod overrides;
mod platforms;
mod pricing;
pub mod providers;
pub mod redact;
mod rpc;
mod slack;
mod tools;
mod tts;
mod types;
mod urls;
mod web;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use acp::{AcpConfig, BUILTIN_HARNESSES, HarnessConfig, NonInteractive, PermissionMode};
pub use agents::{AgentEntry, Binding};
pub use browser::BrowserConfig;
pub use channels::{
    AccessConfig, CommandsConfig, DiscordConfig, DmPolicy, GroupPolicy, ModelChange, Streaming,
    TelegramConfig,
};
pub use cluster::ClusterConfig;
pub use cron::{CronEntry, HEARTBEAT_PROMPT, HeartbeatConfig, TargetConfig, is_valid_job_id};
pub use delivery::{DEFAULT_DELIVERY_TTL, DeliveryConfig};
pub use durations::{MAX_SPAN, MAX_TIMEOUT};
pub use env::{
    SubstError, chela_secrets_present, is_chela_secret, substitute, substitute_required,
};
pub use error::{ConfigError, Location, ParseEnumError};
pub use hooks::{HookConfig, HooksConfig};
pub use log::LogConfig;
pub use mcp::{McpConfig, McpServerConfig};
pub use mcp_names::{is_server_name, mcp_entry_server};
pub use media::{MediaConfig, Vision};
pub use memory::MemoryConfig;
pub use overrides::ENV_OVERRIDES;
pub use platforms::{CHANNEL_TABLES, ChannelsConfig, TOKEN_VARIABLES};
pub use pricing::{PriceEntry, Rate};
pub use providers::ProviderEntry;
pub use redact::REDACTED;
pub use rpc::{DEFAULT_RPC_LISTEN, RpcConfig, discovery_path_for};
pub use slack::SlackConfig;
pub use tools::{
    ExecApprovals, ExecConfig, MESSAGE_ACTIONS, NetworkMode, SandboxMode, SessionsReach,
    TOOL_GROUPS, TOOL_NAMES, ToolProfile, ToolScopeConfig, ToolsConfig, WEB_PORTS,
    expand_tool_name,
};
pub use tts::{TtsConfig, TtsDefault, TtsMode};
pub use types::{
    AgentConfig, Config, DmScope, DropPolicy, ModelConfig, ProviderKind, QueueConfig, QueueLimits,
    QueueMode, SessionConfig, StoreConfig, StoreEngine, TerminalConfig, Thinking,
};
pub use web::{SearchProvider, WebConfig, WebSearchConfig};

/// A loaded, resolved and validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The configuration, with every path absolute.
    pub config: Config,
    /// The file it was read from; `None` when the embedded defaults were used.
    pub source: Option<PathBuf>,
    /// The folder relative paths were resolved against: the file's folder, else `~/.chela`.
    pub base_dir: PathBuf,
    /// Something the operator should hear at start (the store kept at its old place).
    pub notice: Option<String>,
}

impl Config {
    /// Loads the configuration using the process environment (see the module docs for the order).
    pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        Self::load_with_env(explicit, &|name| std::env::var(name).ok())
    }

    /// Like [`Config::load`], reading environment variables through `lookup` (used by tests).
    pub fn load_with_env(
        explicit: Option<&Path>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<LoadedConfig, ConfigError> {
        let source = match explicit {
            Some(path) => Some(existing(path)?),
            None => match lookup("CHELA_CONFIG").filter(|v| !v.is_empty()) {
                Some(path) => Some(existing(Path::new(&path))?),
                None => default_config_path().filter(|path| path.is_file()),
            },
        };
        let home = dirs::home_dir();
        let (mut config, base_dir) = match &source {
            Some(path) => {
                let raw = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                    path: path.clone(),
                    source: e,
                })?;
                let base = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                let base = std::path::absolute(&base).map_err(|e| ConfigError::Read {
                    path: path.clone(),
                    source: e,
                })?;
                let file = path.display().to_string();
                let config = Self::from_toml_str(&raw, &file, lookup)?;
                config.validate().map_err(|e| e.located(&file, &raw))?;
                (config, base)
            }
            None => {
                let home = home.clone().ok_or(ConfigError::NoHome)?;
                (Config::default(), home.join(".chela"))
            }
        };
        config.apply_env(lookup, home.as_deref())?;
        if home.is_none() && config.store.path.starts_with("~") {
            return Err(ConfigError::NoHome);
        }
        let checked = config
            .store
            .check_built()
            .and(config.channels.slack.check_built())
            .and(config.rpc.check())
            .and(config.delivery.check())
            .and(config.media.check())
            .and(config.memory.check())
            .and(config.tts.check())
            .and(config.cluster.check(config.store.is_postgres()))
            .and(cron::check(&config.cron, &config.heartbeat));
        if let Err((key, message)) = checked {
            return Err(ConfigError::Invalid {
                location: None,
                key,
                message,
            });
        }
        let default_store = config.store.path == StoreConfig::default().path;
        config.resolve_paths(&base_dir, home.as_deref());
        // On resolved paths (`~`, relative ones, the defaults of `[[agents]]`).
        if let Err((key, message)) =
            agents::check_workspaces(&config.agent.workspace, &config.agents)
        {
            return Err(ConfigError::Invalid {
                location: None,
                key,
                message,
            });
        }
        let notice = match &source {
            Some(_) if default_store => keep_old_store(&mut config, &base_dir),
            _ => None,
        };
        config.config_file = source.clone();
        Ok(LoadedConfig {
            config,
            source,
            base_dir,
            notice,
        })
    }

    /// Parses config text: `${VAR}` substitution through `lookup`, then typed deserialization.
    /// `file` is the name used in error messages. Paths are left as written.
    pub fn from_toml_str(
        raw: &str,
        file: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let text = substitute_required(raw, lookup).map_err(|e| e.in_file(file))?;
        let de =
            toml::Deserializer::parse(&text).map_err(|e| error::parse_error(file, &text, e))?;
        serde_path_to_error::deserialize(de).map_err(|e| error::de_error(file, &text, e))
    }

    /// Makes every path absolute: `~` becomes the home folder and relative paths are joined to
    /// `base_dir` (the config file's folder).
    pub fn resolve_paths(&mut self, base_dir: &Path, home: Option<&Path>) {
        let resolve = |p: &Path| base_dir.join(expand_home(p, home));
        self.store.path = resolve(&self.store.path);
        self.agent.workspace = resolve(&self.agent.workspace);
        for dir in &mut self.agent.skills_dirs {
            *dir = resolve(dir);
        }
        self.agent.managed_skills_dir = resolve(&self.agent.managed_skills_dir);
        let beside = self.agent.workspace.parent().map(Path::to_path_buf);
        for agent in &mut self.agents {
            agent.workspace = Some(match (&agent.workspace, &beside) {
                (Some(w), _) => resolve(w),
                (None, Some(dir)) => dir.join(format!("workspace-{}", agent.id)),
                (None, None) => resolve(Path::new(&format!("workspace-{}", agent.id))),
            });
        }
        let exec = &mut self.tools.exec;
        for dir in exec
            .allow_read
            .iter_mut()
            .chain(exec.allow_write.iter_mut())
        {
            *dir = resolve(dir);
        }
        if self.log.path().is_some() {
            self.log.file = resolve(&self.log.file);
        }
        self.base_dir = Some(base_dir.to_path_buf());
        for harness in self.acp.agents.values_mut() {
            if let Some(cwd) = harness.cwd.as_mut() {
                *cwd = resolve(cwd);
            }
        }
        for server in self.mcp.servers.values_mut() {
            if server.command.contains('/') {
                server.command = resolve(Path::new(server.command.as_str()))
                    .to_string_lossy()
                    .into_owned();
            }
        }
        for hook in self.hooks.all_mut() {
            // `guard.sh` is looked up on PATH; `./guard.sh`, `hooks/guard.sh`, `~/bin/x` are paths.
            if let Some(program) = hook.command.first_mut().filter(|p| p.contains('/')) {
                *program = resolve(Path::new(program.as_str()))
                    .to_string_lossy()
                    .into_owned();
            }
        }
    }

    /// Cross-field and grammar checks that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| {
            Err(ConfigError::Invalid {
                location: None,
                key: key.to_owned(),
                message,
            })
        };
        if !crate::domain::session_key::is_valid_agent_id(&self.agent.id) {
            return invalid(
                "agent.id",
                format!(
                    "{:?} is not a valid agent id; expected [a-z0-9][a-z0-9_-]{{0,63}}, e.g. {:?}",
                    self.agent.id,
                    crate::domain::session_key::normalize_agent_id(&self.agent.id)
                ),
            );
        }
        let positive = [
            ("queue.cap", self.queue.cap as u64),
            ("model.max_tokens", u64::from(self.model.max_tokens)),
            ("model.idle_timeout_s", self.model.idle_timeout_s),
            ("agent.timeout_s", self.agent.timeout_s),
            ("tools.exec_timeout_s", self.tools.exec_timeout_s),
            ("tools.max_output_chars", self.tools.max_output_chars as u64),
            ("acp.ask_timeout_s", self.acp.ask_timeout_s),
            ("acp.binding_idle_s", self.acp.binding_idle_s),
            ("acp.process_idle_s", self.acp.process_idle_s),
            ("tools.approval_timeout_s", self.tools.approval_timeout_s),
            (
                "channels.discord.upload_mb",
                self.channels.discord.upload_mb,
            ),
        ];
        for (key, value) in positive {
            if value == 0 {
                return invalid(key, "must be at least 1".to_owned());
            }
        }
        if let Err((key, message)) = durations::check(self) {
            return invalid(&key, message);
        }
        if self.channels.discord.shards > channels::MAX_DISCORD_SHARDS {
            return invalid(
                "channels.discord.shards",
                format!(
                    "{} is more than {} shards",
                    self.channels.discord.shards,
                    channels::MAX_DISCORD_SHARDS
                ),
            );
        }
        if self.agent.bootstrap_max_chars > self.agent.bootstrap_total_max_chars {
            return invalid(
                "agent.bootstrap_max_chars",
                "must not exceed agent.bootstrap_total_max_chars".to_owned(),
            );
        }
        if self.model.context_window > 0
            && self.agent.compaction_reserve_tokens >= self.model.context_window
        {
            return invalid(
                "agent.compaction_reserve_tokens",
                "must be less than model.context_window (or set model.context_window = 0 to turn compaction off)".to_owned(),
            );
        }
        if let Some(key) = pricing::wrong_rate(&self.pricing) {
            return invalid(
                &key,
                "must be a price of 0 or more (US dollars per million tokens)".to_owned(),
            );
        }
        for (peer, ids) in &self.session.identity_links {
            if peer.trim().is_empty() {
                return invalid("session.identity_links", "empty canonical peer".to_owned());
            }
            for id in ids {
                match id.split_once(':') {
                    Some((channel, user)) if !channel.is_empty() && !user.is_empty() => {}
                    _ => {
                        return invalid(
                            "session.identity_links",
                            format!("{id:?} (for {peer:?}): expected \"channel:peer_id\""),
                        );
                    }
                }
            }
        }
        if let Err((key, message)) = self.tools.check() {
            return invalid(&key, message);
        }
        for (name, harness) in &self.acp.agents {
            if harness.command.first().is_none_or(|p| p.trim().is_empty()) {
                return invalid(
                    &format!("acp.agents.{name}.command"),
                    "must name a program, e.g. [\"codex-acp\"]".to_owned(),
                );
            }
        }
        if let Err((key, message)) = self.hooks.check() {
            return invalid(&key, message);
        }
        if let Err((key, message)) = self.mcp.check().and(mcp::check_references(self)) {
            return invalid(&key, message);
        }
        if let Err((key, message)) = agents::check(&self.agent.id, &self.agents, &self.bindings) {
            return invalid(&key, message);
        }
        if let Err((key, message)) = providers::check(self) {
            return invalid(&key, message);
        }
        if let Err((key, message)) = self.check_urls() {
            return invalid(&key, message);
        }
        Ok(())
    }

    /// The global limit on concurrent runs: `agent.max_concurrent_runs`, or when 0,
    /// [`DEFAULT_MAX_CONCURRENT_RUNS`].
    pub fn resolved_max_concurrent_runs(&self) -> usize {
        match self.agent.max_concurrent_runs {
            0 => DEFAULT_MAX_CONCURRENT_RUNS,
            n => n,
        }
    }
}

/// Runs at once by default. A run mostly waits on the model over the network, so the limit
/// is not the core count: 64 runs cost a few MiB, and a ninth user does not wait for
/// someone else's reply as with the old max(8, 4 x cores).
pub const DEFAULT_MAX_CONCURRENT_RUNS: usize = 64;

/// The config file read when none is named: the platform config folder's
/// `chela/config.toml` (`~/.config/chela/config.toml` on Linux); `None` without a home.
pub fn default_config_path() -> Option<PathBuf> {
    dirs::config_dir().map(|dir| dir.join("chela").join("config.toml"))
}

/// Before the store defaulted to `~/.chela/data` it was `data` beside the config file. When
/// `store.path` is not set, that old store exists and the new place holds none, the old one
/// is used, so an upgrade does not start on an empty store; returns what to tell the operator.
fn keep_old_store(config: &mut Config, base_dir: &Path) -> Option<String> {
    let old = base_dir.join("data");
    let sled_store = |dir: &Path| dir.join("conf").is_file() || dir.join("db").is_file();
    if old == config.store.path || !sled_store(&old) || config.store.path.exists() {
        return None;
    }
    let notice = format!(
        "using the store at {} (the default before it moved to {}); set store.path to keep it there, or move it",
        old.display(),
        config.store.path.display()
    );
    config.store.path = old;
    Some(notice)
}

/// Checks that an explicitly named config file exists.
fn existing(path: &Path) -> Result<PathBuf, ConfigError> {
    if path.is_file() {
        Ok(path.to_path_buf())
    } else {
        Err(ConfigError::NotFound {
            path: path.to_path_buf(),
        })
    }
}

/// Replaces a leading `~` (alone or followed by a separator) with `home`, when known.
pub(crate) fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) if rest.as_os_str().is_empty() => home.to_path_buf(),
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}
