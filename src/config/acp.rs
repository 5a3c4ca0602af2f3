//! `[acp]`: coding agents reached over ACP (SPEC 4) and the harness registry.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ParseEnumError;

/// How the agent's permission requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Allow everything.
    ApproveAll,
    /// Allow reads (read, search, fetch, think), deny the rest.
    #[default]
    ApproveReads,
    /// Deny everything.
    DenyAll,
    /// Ask the owner in the bound conversation; no answer in time denies.
    Ask,
}

named_enum!(PermissionMode, "permission mode", [
    ApproveAll => "approve-all", ApproveReads => "approve-reads", DenyAll => "deny-all", Ask => "ask",
]);

/// What `ask` does when nobody can be asked (no bound conversation, e.g. a tool-spawned run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NonInteractive {
    /// Deny the request and go on.
    #[default]
    Deny,
    /// Fail the turn.
    Fail,
}

named_enum!(NonInteractive, "non_interactive", [Deny => "deny", Fail => "fail"]);

/// `[acp.agents.NAME]`: how to start one coding agent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HarnessConfig {
    /// Program and arguments; the program is looked up on `PATH`.
    pub command: Vec<String>,
    /// Extra environment for the agent process.
    pub env: BTreeMap<String, String>,
    /// The default working folder of its sessions (else `[agent] workspace`).
    pub cwd: Option<PathBuf>,
}

/// `[acp]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AcpConfig {
    /// `approve-all` | `approve-reads` | `deny-all` | `ask`.
    pub permissions: PermissionMode,
    /// What `ask` does where nobody can be asked: `deny` | `fail`.
    pub non_interactive: NonInteractive,
    /// Seconds the owner has to answer a permission question before it is denied.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub ask_timeout_s: u64,
    /// The harness `/acp spawn` uses when none is named.
    pub default_agent: String,
    /// Seconds without a turn after which a binding expires.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub binding_idle_s: u64,
    /// Seconds without a turn after which a warm agent process is shut down.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub process_idle_s: u64,
    /// Show tool calls and plans as compact progress lines.
    pub progress: bool,
    /// Most bytes of output a client terminal keeps.
    pub terminal_output_limit: usize,
    /// How agent processes and their terminal commands are confined: `landlock` (everything
    /// this user can reach except chela's store, RPC token file and config) | `off`.
    pub sandbox: super::SandboxMode,
    /// `web` | `none` | `all`: the TCP ports agent processes and their terminal commands may
    /// connect to under the sandbox (listening is refused unless `all`).
    pub network: super::NetworkMode,
    /// More TCP ports agents may connect to under the sandbox (a model server's port).
    pub allow_ports: Vec<u16>,
    /// Harnesses by name; they add to (or replace) the built-in ones.
    pub agents: BTreeMap<String, HarnessConfig>,
}

impl Default for AcpConfig {
    fn default() -> Self {
        Self {
            permissions: PermissionMode::ApproveReads,
            non_interactive: NonInteractive::Deny,
            ask_timeout_s: 300,
            default_agent: "codex".to_owned(),
            binding_idle_s: 24 * 3600,
            process_idle_s: 1800,
            progress: true,
            terminal_output_limit: 1024 * 1024,
            sandbox: super::SandboxMode::Landlock,
            network: super::NetworkMode::Web,
            allow_ports: Vec::new(),
            agents: BTreeMap::new(),
        }
    }
}

/// The built-in harnesses: name and command.
pub const BUILTIN_HARNESSES: &[(&str, &[&str])] = &[
    ("codex", &["npx", "-y", "@zed-industries/codex-acp"]),
    (
        "claude",
        &["npx", "-y", "@agentclientprotocol/claude-agent-acp"],
    ),
    ("gemini", &["gemini", "--acp"]),
    ("opencode", &["opencode", "acp"]),
    ("pi", &["pi-acp"]),
];

impl AcpConfig {
    /// Every harness: the built-ins overlaid by `[acp.agents.*]`.
    pub fn harnesses(&self) -> BTreeMap<String, HarnessConfig> {
        let mut all: BTreeMap<String, HarnessConfig> = BUILTIN_HARNESSES
            .iter()
            .map(|(name, command)| {
                let harness = HarnessConfig {
                    command: command.iter().map(|s| (*s).to_owned()).collect(),
                    ..HarnessConfig::default()
                };
                ((*name).to_owned(), harness)
            })
            .collect();
        for (name, harness) in &self.agents {
            all.insert(name.clone(), harness.clone());
        }
        all
    }
}
