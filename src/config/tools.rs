//! `[tools]`: tool limits and the tool policy (profiles, allow and deny lists, per channel
//! and per group overrides, exec approvals).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ParseEnumError;

/// The base set of tools a conversation gets before `allow` and `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProfile {
    /// No tools: chat only.
    Minimal,
    /// `message` (and its actions `message:react`, `message:edit`, `message:delete`,
    /// `message:poll`; not `message:pin`), `sessions_list`, `sessions_history`, `web_fetch`,
    /// `web_search`.
    Messaging,
    /// Files, `exec`, `process`, `sessions_spawn`, the session tools (not `message`) and the
    /// web tools.
    Coding,
    /// Every tool.
    Full,
}

named_enum!(ToolProfile, "tool profile", [
    Minimal => "minimal", Messaging => "messaging", Coding => "coding", Full => "full",
]);

/// Whether `exec` needs the owner's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecApprovals {
    /// Commands run without asking.
    #[default]
    Off,
    /// Each command needs `/approve <id> allow-once|allow-always|deny` from the owner.
    Ask,
}

named_enum!(ExecApprovals, "exec approvals", [Off => "off", Ask => "ask"]);

/// Which sessions the session tools (`message` to a target, `sessions_list`,
/// `sessions_history`) of a run reach when not every message of the run came from an owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionsReach {
    /// The run's own session and the sub-agent sessions it started; an owner's run reaches
    /// every session (of its agent, unless `cross_agent_sessions`).
    #[default]
    Own,
    /// Every session of its agent, whoever asked (the operator opened them).
    All,
}

named_enum!(SessionsReach, "sessions reach", [Own => "own", All => "all"]);

/// How the processes chela starts for the agent are confined (`[tools.exec]`, `[acp]`,
/// `[hooks]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Landlock (Linux). `exec`: read the system and the workspace, write the workspace and a
    /// temp folder, nothing else; where the kernel lacks it, each command needs approval.
    /// Hooks and coding agents: everything but chela's own files; where the kernel lacks it,
    /// they run unconfined (with a warning).
    #[default]
    Landlock,
    /// No confinement: the processes reach everything this user can.
    Off,
}

named_enum!(SandboxMode, "sandbox", [Landlock => "landlock", Off => "off"]);

/// The TCP network the processes chela starts may use under the Landlock sandbox (`network`
/// of `[tools.exec]`, `[acp]` and `[hooks]`). Unless `all`, they can listen on no port at
/// all (so nothing they run can receive what a browser sends to a local port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NetworkMode {
    /// Connect to TCP ports 80 and 443 (and `allow_ports`) only; bind and listen on none.
    #[default]
    #[serde(rename = "web")]
    Web,
    /// Connect to no TCP port (but `allow_ports`); bind and listen on none.
    #[serde(rename = "none")]
    Closed,
    /// No network rule: the operator's explicit choice.
    #[serde(rename = "all")]
    All,
}

named_enum!(NetworkMode, "network", [Web => "web", Closed => "none", All => "all"]);

/// The TCP ports `network = "web"` opens for connecting.
pub const WEB_PORTS: &[u16] = &[80, 443];

impl NetworkMode {
    /// The TCP ports processes may connect to under this mode with `allow_ports` added
    /// (sorted, no repeats), or `None` when TCP is not confined (`all`).
    pub fn connect_ports(self, allow_ports: &[u16]) -> Option<Vec<u16>> {
        let base: &[u16] = match self {
            NetworkMode::Web => WEB_PORTS,
            NetworkMode::Closed => &[],
            NetworkMode::All => return None,
        };
        let mut ports: Vec<u16> = base.iter().chain(allow_ports).copied().collect();
        ports.sort_unstable();
        ports.dedup();
        Some(ports)
    }
}

/// `[tools.exec]`: what commands the model runs can reach.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// `landlock` | `off`.
    pub sandbox: SandboxMode,
    /// Names of chela's environment variables passed to commands (beyond PATH, HOME, LANG,
    /// TERM and the like).
    pub pass_env: Vec<String>,
    /// More folders commands may read (and execute from) under the sandbox.
    pub allow_read: Vec<PathBuf>,
    /// More folders commands may write under the sandbox.
    pub allow_write: Vec<PathBuf>,
    /// `web` | `none` | `all`: the TCP ports commands may connect to under the sandbox
    /// (listening is refused unless `all`).
    pub network: NetworkMode,
    /// More TCP ports commands may connect to under the sandbox.
    pub allow_ports: Vec<u16>,
}

/// The actions of the `message` tool beyond sending, each a name of its own in `allow` and
/// `deny` (`message` itself is sending; a deny of `message` takes every action too).
pub const MESSAGE_ACTIONS: &[&str] = &[
    "message:react",
    "message:edit",
    "message:delete",
    "message:pin",
    "message:poll",
];

/// Every tool chela's agent has, by name, and the `message` tool's actions
/// ([`MESSAGE_ACTIONS`]).
pub const TOOL_NAMES: &[&str] = &[
    "read",
    "ls",
    "write",
    "edit",
    "exec",
    "process",
    "message",
    "message:react",
    "message:edit",
    "message:delete",
    "message:pin",
    "message:poll",
    "sessions_list",
    "sessions_history",
    "sessions_spawn",
    "cron",
    "web_fetch",
    "web_search",
    "browser",
    "memory_search",
    "memory_get",
];

/// Names that stand for several tools in `allow` and `deny` (`"*"` stands for all).
pub const TOOL_GROUPS: &[(&str, &[&str])] = &[
    ("group:fs", &["read", "ls", "write", "edit"]),
    ("group:runtime", &["exec", "process"]),
    (
        "group:sessions",
        &["sessions_list", "sessions_history", "sessions_spawn"],
    ),
    (
        "group:messaging",
        &[
            "message",
            "message:react",
            "message:edit",
            "message:delete",
            "message:poll",
        ],
    ),
    ("group:message_actions", MESSAGE_ACTIONS),
    ("group:web", &["web_fetch", "web_search", "browser"]),
    ("group:memory", &["memory_search", "memory_get"]),
];

impl ToolProfile {
    /// The tools of this profile.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            ToolProfile::Minimal => &[],
            ToolProfile::Messaging => &[
                "message",
                "message:react",
                "message:edit",
                "message:delete",
                "message:poll",
                "sessions_list",
                "sessions_history",
                "web_fetch",
                "web_search",
            ],
            ToolProfile::Coding => &[
                "read",
                "ls",
                "write",
                "edit",
                "exec",
                "process",
                "sessions_list",
                "sessions_history",
                "sessions_spawn",
                "web_fetch",
                "web_search",
                "browser",
                "memory_search",
                "memory_get",
            ],
            ToolProfile::Full => TOOL_NAMES,
        }
    }
}

/// The tools an `allow` or `deny` entry names: a tool, a `group:*` name or `"*"`; `None`
/// for a name chela does not know.
pub fn expand_tool_name(entry: &str) -> Option<Vec<&'static str>> {
    if entry == "*" {
        return Some(TOOL_NAMES.to_vec());
    }
    if let Some(name) = TOOL_NAMES.iter().find(|n| **n == entry) {
        return Some(vec![name]);
    }
    TOOL_GROUPS
        .iter()
        .find(|(group, _)| *group == entry)
        .map(|(_, tools)| tools.to_vec())
}

/// `[tools.channels.NAME]` and `[tools.groups."CHANNEL:CHAT"]`: overrides of the policy for
/// one channel or one group chat.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolScopeConfig {
    /// The profile of direct chats on this channel, or of this group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ToolProfile>,
    /// The profile of groups, rooms, threads and topics on this channel (channels only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_profile: Option<ToolProfile>,
    /// Tools added to the profile.
    pub allow: Vec<String>,
    /// Tools taken away (deny always wins).
    pub deny: Vec<String>,
    /// Whether `exec` needs approval here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_approvals: Option<ExecApprovals>,
}

/// `[tools]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Default timeout of an `exec` call, in seconds.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub exec_timeout_s: u64,
    /// Tool output longer than this is truncated (head and tail kept).
    pub max_output_chars: usize,
    /// The profile of direct chats, the terminal and `chela agent`.
    pub profile: ToolProfile,
    /// The profile of groups, rooms, threads and topics (safer by default).
    pub group_profile: ToolProfile,
    /// Tools added to the profile everywhere.
    pub allow: Vec<String>,
    /// Tools taken away everywhere (deny always wins).
    pub deny: Vec<String>,
    /// Whether `exec` needs the owner's approval: `off` | `ask`.
    pub exec_approvals: ExecApprovals,
    /// Seconds the owner has to answer an approval before it is denied.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub approval_timeout_s: u64,
    /// Whether the session tools (`message` to a target, `sessions_list`,
    /// `sessions_history`) reach the sessions of other `[[agents]]` too; by default an agent
    /// sees only its own.
    pub cross_agent_sessions: bool,
    /// `own` | `all`: which sessions a run not wholly asked by owners reaches through the
    /// session tools (`[[agents]] tools_sessions` per agent).
    pub sessions: SessionsReach,
    /// Overrides per channel (`telegram`, `discord`, `terminal`).
    pub channels: BTreeMap<String, ToolScopeConfig>,
    /// Overrides per group chat, keyed `"<channel>:<chat id>"`.
    pub groups: BTreeMap<String, ToolScopeConfig>,
    /// `[tools.exec]`: the sandbox and environment of `exec`.
    pub exec: ExecConfig,
    /// `[tools.web]`: `web_fetch` limits and address rule, `web_search`'s provider.
    pub web: super::web::WebConfig,
    /// `[tools.browser]`: the `browser` tool's Chromium and limits.
    pub browser: super::browser::BrowserConfig,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            exec_timeout_s: 120,
            max_output_chars: 20_000,
            profile: ToolProfile::Full,
            group_profile: ToolProfile::Minimal,
            allow: Vec::new(),
            deny: Vec::new(),
            exec_approvals: ExecApprovals::Off,
            approval_timeout_s: 300,
            cross_agent_sessions: false,
            sessions: SessionsReach::Own,
            channels: BTreeMap::new(),
            groups: BTreeMap::new(),
            exec: ExecConfig::default(),
            web: super::web::WebConfig::default(),
            browser: super::browser::BrowserConfig::default(),
        }
    }
}

impl ToolsConfig {
    /// Checks every tool list and override; the error names the key and what is wrong.
    pub fn check(&self) -> Result<(), (String, String)> {
        check_names("tools.allow", &self.allow)?;
        check_names("tools.deny", &self.deny)?;
        self.web.check()?;
        self.browser.check()?;
        for (name, scope) in &self.channels {
            let key = format!("tools.channels.{name}");
            check_names(&format!("{key}.allow"), &scope.allow)?;
            check_names(&format!("{key}.deny"), &scope.deny)?;
        }
        for (name, scope) in &self.groups {
            let key = format!("tools.groups.\"{name}\"");
            if !name
                .split_once(':')
                .is_some_and(|(c, g)| !c.is_empty() && !g.is_empty())
            {
                return Err((key, "expected \"<channel>:<chat id>\"".to_owned()));
            }
            if scope.group_profile.is_some() {
                return Err((
                    format!("{key}.group_profile"),
                    "a group takes `profile`; group_profile is for [tools.channels.*]".to_owned(),
                ));
            }
            check_names(&format!("{key}.allow"), &scope.allow)?;
            check_names(&format!("{key}.deny"), &scope.deny)?;
        }
        Ok(())
    }
}

fn check_names(key: &str, names: &[String]) -> Result<(), (String, String)> {
    for name in names {
        if expand_tool_name(name).is_none() && super::mcp_names::mcp_entry_server(name).is_none() {
            let groups: Vec<&str> = TOOL_GROUPS.iter().map(|(g, _)| *g).collect();
            return Err((
                key.to_owned(),
                format!(
                    "unknown tool {name:?}; expected one of {}, {}, \"*\", or an MCP server's \"mcp:NAME\" or \"NAME__tool\"",
                    TOOL_NAMES.join(", "),
                    groups.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn profiles_name_known_tools_and_grow() {
        for profile in [
            ToolProfile::Minimal,
            ToolProfile::Messaging,
            ToolProfile::Coding,
            ToolProfile::Full,
        ] {
            for tool in profile.tools() {
                assert!(TOOL_NAMES.contains(tool), "{profile}: {tool}");
            }
        }
        assert!(ToolProfile::Minimal.tools().is_empty());
        assert!(!ToolProfile::Coding.tools().contains(&"message"));
        for action in MESSAGE_ACTIONS {
            assert!(TOOL_NAMES.contains(action), "{action}");
            assert!(!ToolProfile::Coding.tools().contains(action), "{action}");
        }
        // Messaging may react, edit and delete its own messages and start polls, not pin.
        let messaging = ToolProfile::Messaging.tools();
        assert!(messaging.contains(&"message:poll") && !messaging.contains(&"message:pin"));
        assert_eq!(ToolProfile::Full.tools().len(), TOOL_NAMES.len());
    }

    #[test]
    fn names_expand_to_tools() {
        assert_eq!(expand_tool_name("exec").unwrap(), ["exec"]);
        assert_eq!(
            expand_tool_name("group:runtime").unwrap(),
            ["exec", "process"]
        );
        assert_eq!(expand_tool_name("*").unwrap().len(), TOOL_NAMES.len());
        assert!(expand_tool_name("exce").is_none());
        assert_eq!(expand_tool_name("message:pin").unwrap(), ["message:pin"]);
        assert_eq!(expand_tool_name("group:message_actions").unwrap().len(), 5);
        assert_eq!(expand_tool_name("group:messaging").unwrap().len(), 5);
        assert!(expand_tool_name("message:shout").is_none());
    }

    #[test]
    fn check_names_the_bad_key() {
        let mut tools = ToolsConfig::default();
        tools.channels.insert(
            "telegram".into(),
            ToolScopeConfig {
                deny: vec!["exce".into()],
                ..Default::default()
            },
        );
        let (key, message) = tools.check().unwrap_err();
        assert_eq!(key, "tools.channels.telegram.deny");
        assert!(message.contains("\"exce\""), "{message}");

        let mut tools = ToolsConfig::default();
        tools
            .groups
            .insert("-100".into(), ToolScopeConfig::default());
        assert_eq!(tools.check().unwrap_err().0, "tools.groups.\"-100\"");

        let mut tools = ToolsConfig::default();
        tools.groups.insert(
            "telegram:-100".into(),
            ToolScopeConfig {
                group_profile: Some(ToolProfile::Full),
                ..Default::default()
            },
        );
        assert_eq!(
            tools.check().unwrap_err().0,
            "tools.groups.\"telegram:-100\".group_profile"
        );
    }
}
