//! Tool policy (SPEC 7): which tools a session's run may use, from its conversation.
//!
//! A direct chat (and the terminal, and `chela agent`) starts from `tools.profile`; a group,
//! room, thread or topic from `tools.group_profile`. A `[tools.channels.NAME]` entry can
//! replace either profile for its channel, and a `[tools.groups."CHANNEL:CHAT"]` entry the
//! profile of one group. Then the `allow` lists (agent, channel, group) add tools and the
//! `deny` lists take them away; deny always wins. A sub-agent runs under its parent's policy.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::Value;

use crate::config::{
    ExecApprovals, MESSAGE_ACTIONS, ToolProfile, ToolScopeConfig, ToolsConfig, expand_tool_name,
    mcp_entry_server,
};
use crate::domain::session_key::{KeyBase, SessionKey};

/// Where a session's conversation is, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// A group, room, thread of one, or forum topic (not a direct chat).
    pub group: bool,
    /// The channel, when the key names one.
    pub channel: Option<String>,
    /// `"<channel>:<chat>"` of a group chat.
    pub chat: Option<String>,
}

impl Scope {
    /// The scope of `key`; a key that does not parse counts as a direct chat of no channel.
    pub fn of(key: &str) -> Scope {
        let Ok(key) = SessionKey::parse(key) else {
            return Scope::default();
        };
        let (group, channel, chat) = match key.base {
            KeyBase::Group { channel, chat }
            | KeyBase::Room { channel, chat }
            | KeyBase::Topic { channel, chat, .. } => {
                let chat = format!("{channel}:{chat}");
                (true, Some(channel), Some(chat))
            }
            KeyBase::ChannelDirect { channel, .. } | KeyBase::AccountDirect { channel, .. } => {
                (false, Some(channel), None)
            }
            _ => (false, None, None),
        };
        Scope {
            group,
            channel,
            chat,
        }
    }
}

impl Scope {
    /// The scope of conversation `to` (what an isolated scheduled job's run answers in).
    pub fn of_conversation(to: &chela_channel::Conversation) -> Scope {
        let group = to.kind != chela_channel::ChatKind::Direct;
        Scope {
            group,
            channel: Some(to.channel.clone()),
            chat: group.then(|| format!("{}:{}", to.channel, to.chat_id)),
        }
    }
}

/// The tools one run may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The profile it started from.
    pub profile: ToolProfile,
    /// Every tool, including any chela's lists do not name (profile `full` or allow `"*"`).
    everything: bool,
    tools: BTreeSet<String>,
    denied: BTreeSet<String>,
    /// Whether `exec` needs the owner's approval.
    pub exec_approvals: ExecApprovals,
}

impl Allowed {
    /// No tools at all (when the scope cannot be known).
    pub fn none() -> Allowed {
        Allowed {
            profile: ToolProfile::Minimal,
            everything: false,
            tools: BTreeSet::new(),
            denied: BTreeSet::new(),
            exec_approvals: ExecApprovals::Ask,
        }
    }

    /// Whether the tool named `name` may run. A tool of an MCP server (`SERVER__tool`) is
    /// also named by `mcp:SERVER` and `mcp:*` (and a deny of `"*"` takes it away). A tool's
    /// action (`message:react`) goes with a deny of its tool (`message`).
    pub fn allows(&self, name: &str) -> bool {
        if let Some((tool, _)) = name.split_once(':')
            && self.denied.contains(tool)
        {
            return false;
        }
        let Some((server, _)) = name.split_once("__") else {
            return !self.denied.contains(name) && (self.everything || self.tools.contains(name));
        };
        let names = [name.to_owned(), format!("mcp:{server}"), "mcp:*".to_owned()];
        let denied = self.denied.contains("*") || names.iter().any(|n| self.denied.contains(n));
        !denied && (self.everything || names.iter().any(|n| self.tools.contains(n)))
    }

    /// Whether the tool named `name` is offered to the model: it may run, or one of its
    /// actions may (a conversation that may react but not send still gets `message`).
    pub fn offers(&self, name: &str) -> bool {
        self.allows(name)
            || MESSAGE_ACTIONS
                .iter()
                .filter(|action| action.split_once(':').is_some_and(|(tool, _)| tool == name))
                .any(|action| self.allows(action))
    }

    /// Whether a call of tool `name` with `args` may run: the policy name of the call
    /// ([`call_name`]) must be allowed.
    pub fn allows_call(&self, name: &str, args: &Value) -> bool {
        self.allows(&call_name(name, args))
    }

    /// Takes `name` away (a sub-agent may not spawn).
    pub fn remove(&mut self, name: &str) {
        self.denied.insert(name.to_owned());
    }
}

/// The name the policy knows a call of tool `name` with `args` by: `message:<action>` for a
/// `message` call whose `action` is not `send` (`message:react`, ...), else `name` itself.
pub fn call_name<'a>(name: &'a str, args: &Value) -> Cow<'a, str> {
    match args.get("action").and_then(Value::as_str).map(str::trim) {
        Some(action) if name == "message" && !action.is_empty() && action != "send" => {
            Cow::Owned(format!("message:{action}"))
        }
        _ => Cow::Borrowed(name),
    }
}

/// Resolves [`Allowed`] sets from `[tools]`.
#[derive(Debug, Clone, Default)]
pub struct ToolPolicy {
    config: ToolsConfig,
}

impl ToolPolicy {
    /// The policy `[tools]` describes.
    pub fn new(config: &ToolsConfig) -> ToolPolicy {
        ToolPolicy {
            config: config.clone(),
        }
    }

    /// What a run in `scope` may use.
    pub fn resolve(&self, scope: &Scope) -> Allowed {
        let c = &self.config;
        let channel = scope.channel.as_ref().and_then(|name| c.channels.get(name));
        let group = scope.chat.as_ref().and_then(|chat| c.groups.get(chat));
        let channel_profile = channel.and_then(|ch| {
            if scope.group {
                ch.group_profile
            } else {
                ch.profile
            }
        });
        let default_profile = if scope.group {
            c.group_profile
        } else {
            c.profile
        };
        let profile = group
            .and_then(|g| g.profile)
            .or(channel_profile)
            .unwrap_or(default_profile);
        let scopes: Vec<&ToolScopeConfig> = channel.into_iter().chain(group).collect();
        let allows: Vec<&String> = c
            .allow
            .iter()
            .chain(scopes.iter().flat_map(|s| &s.allow))
            .collect();
        let everything = profile == ToolProfile::Full || allows.iter().any(|a| *a == "*");
        // MCP entries (`mcp:NAME`, `NAME__tool`) and `"*"` are kept as written too.
        let expand = |names: Vec<&String>| -> BTreeSet<String> {
            let raw = names
                .iter()
                .filter(|n| n.as_str() == "*" || mcp_entry_server(n).is_some())
                .map(|n| (*n).clone());
            let expanded = (names.iter())
                .flat_map(|name| expand_tool_name(name).unwrap_or_default())
                .map(str::to_owned);
            expanded.chain(raw).collect()
        };
        let mut tools = expand(allows);
        tools.extend(profile.tools().iter().map(|t| (*t).to_owned()));
        let denied = expand(
            c.deny
                .iter()
                .chain(scopes.iter().flat_map(|s| &s.deny))
                .collect(),
        );
        let exec_approvals = group
            .and_then(|g| g.exec_approvals)
            .or(channel.and_then(|ch| ch.exec_approvals))
            .unwrap_or(c.exec_approvals);
        Allowed {
            profile,
            everything,
            tools,
            denied,
            exec_approvals,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn policy(toml: &str) -> ToolPolicy {
        let config: crate::config::Config = toml::from_str(toml).unwrap();
        config.tools.check().unwrap();
        ToolPolicy::new(&config.tools)
    }

    fn names(allowed: &Allowed) -> Vec<&'static str> {
        crate::config::TOOL_NAMES
            .iter()
            .copied()
            .filter(|t| allowed.allows(t))
            .collect()
    }

    const DM: &str = "agent:main:telegram:direct:42";
    const GROUP: &str = "agent:main:telegram:group:-100";
    const TOPIC: &str = "agent:main:telegram:group:-100:topic:7";
    const DISCORD_THREAD: &str = "agent:main:discord:channel:55:thread:66";

    #[test]
    fn scopes_come_from_keys() {
        assert_eq!(
            Scope::of(TOPIC),
            Scope {
                group: true,
                channel: Some("telegram".into()),
                chat: Some("telegram:-100".into())
            }
        );
        assert!(Scope::of(DISCORD_THREAD).group);
        assert_eq!(Scope::of(DM).channel.as_deref(), Some("telegram"));
        assert!(!Scope::of("agent:main:main").group);
        assert_eq!(Scope::of("not a key"), Scope::default());
    }

    #[test]
    fn groups_default_to_a_safer_profile_than_direct_chats() {
        let p = policy("");
        let dm = p.resolve(&Scope::of(DM));
        assert_eq!(dm.profile, ToolProfile::Full);
        assert!(dm.allows("exec") && dm.allows("message"));
        let group = p.resolve(&Scope::of(GROUP));
        assert_eq!(group.profile, ToolProfile::Minimal);
        assert!(names(&group).is_empty());
        assert!(names(&p.resolve(&Scope::of(DISCORD_THREAD))).is_empty());
        // Full means every tool, also ones chela's lists do not name.
        assert!(dm.allows("some_plugin_tool"));
    }

    #[test]
    fn channel_and_group_overrides_apply_in_order() {
        let p = policy(
            r#"
            [tools]
            profile = "coding"
            group_profile = "messaging"
            deny = ["process"]
            [tools.channels.telegram]
            group_profile = "coding"
            allow = ["message"]
            [tools.groups."telegram:-100"]
            profile = "minimal"
            allow = ["read"]
            deny = ["message"]
            "#,
        );
        // The agent's own DM profile, minus the agent-wide deny, plus the channel's allow.
        let dm = p.resolve(&Scope::of(DM));
        assert!(dm.allows("exec") && dm.allows("message") && !dm.allows("process"));
        // The group entry wins over the channel's group profile; its deny beats the allow.
        assert_eq!(names(&p.resolve(&Scope::of(TOPIC))), ["read"]);
        // Another Telegram group: the channel's group profile, minus process, plus message.
        let other = p.resolve(&Scope::of("agent:main:telegram:group:-200"));
        assert_eq!(other.profile, ToolProfile::Coding);
        assert!(other.allows("message") && !other.allows("process"));
        // Discord groups: the agent's group profile.
        let discord = p.resolve(&Scope::of(DISCORD_THREAD));
        assert_eq!(discord.profile, ToolProfile::Messaging);
    }

    #[test]
    fn web_tools_come_with_messaging_and_up_and_group_web_names_both() {
        let p = policy("");
        let web = ["web_fetch", "web_search"];
        // The browser comes with coding and full, and `group:web` names it too.
        for (profile, has) in [("messaging", false), ("coding", true), ("full", true)] {
            let p = policy(&format!("[tools]\nprofile = \"{profile}\"\n"));
            assert_eq!(
                p.resolve(&Scope::of(DM)).allows("browser"),
                has,
                "{profile}"
            );
        }
        for (profile, has) in [
            (ToolProfile::Minimal, false),
            (ToolProfile::Messaging, true),
            (ToolProfile::Coding, true),
            (ToolProfile::Full, true),
        ] {
            let p = policy(&format!("[tools]\nprofile = \"{profile}\"\n"));
            let dm = p.resolve(&Scope::of(DM));
            for tool in web {
                assert_eq!(dm.allows(tool), has, "{profile}: {tool}");
            }
        }
        // Groups keep the minimal profile by default: no web tools.
        let group = p.resolve(&Scope::of(GROUP));
        assert!(!group.allows("web_fetch") && !group.allows("web_search"));
        let p = policy(
            r#"
            [tools]
            allow = ["group:web"]
            [tools.channels.telegram]
            deny = ["web_search"]
            "#,
        );
        assert_eq!(
            names(&p.resolve(&Scope::of(DISCORD_THREAD))),
            ["web_fetch", "web_search", "browser"]
        );
        assert_eq!(
            names(&p.resolve(&Scope::of(GROUP))),
            ["web_fetch", "browser"]
        );
        let p = policy("[tools]\ndeny = [\"group:web\"]\n");
        let dm = p.resolve(&Scope::of(DM));
        assert!(!dm.allows("web_fetch") && !dm.allows("web_search") && dm.allows("exec"));
    }

    #[test]
    fn memory_tools_come_with_coding_and_full_and_group_memory_names_both() {
        let memory = ["memory_search", "memory_get"];
        for (profile, has) in [
            (ToolProfile::Minimal, false),
            (ToolProfile::Messaging, false),
            (ToolProfile::Coding, true),
            (ToolProfile::Full, true),
        ] {
            let p = policy(&format!("[tools]\nprofile = \"{profile}\"\n"));
            let dm = p.resolve(&Scope::of(DM));
            for tool in memory {
                assert_eq!(dm.allows(tool), has, "{profile}: {tool}");
            }
        }
        let p = policy("[tools]\ngroup_profile = \"minimal\"\nallow = [\"group:memory\"]\n");
        assert_eq!(names(&p.resolve(&Scope::of(GROUP))), memory);
        let p = policy("[tools]\ndeny = [\"group:memory\"]\n");
        let dm = p.resolve(&Scope::of(DM));
        assert!(!dm.allows("memory_search") && !dm.allows("memory_get") && dm.allows("read"));
    }

    #[test]
    fn mcp_tools_come_with_full_or_by_server_or_by_name_and_deny_wins() {
        let direct = Scope::of("agent:main:main");
        let p = policy("[tools]\nprofile = \"full\"\ndeny = [\"mcp:web\", \"files__write\"]\n");
        let a = p.resolve(&direct);
        assert!(a.allows("files__read"));
        assert!(!a.allows("files__write"));
        assert!(!a.allows("web__fetch"));
        let p = policy("[tools]\nprofile = \"coding\"\nallow = [\"mcp:files\", \"web__fetch\"]\n");
        let a = p.resolve(&direct);
        assert!(a.allows("files__write") && a.allows("web__fetch"));
        assert!(!a.allows("web__other") && !a.allows("docs__search"));
        let p = policy("[tools]\nprofile = \"coding\"\nallow = [\"mcp:*\"]\n");
        assert!(p.resolve(&direct).allows("docs__search"));
        let p = policy("[tools]\nprofile = \"full\"\ndeny = [\"*\"]\n");
        assert!(!p.resolve(&direct).allows("docs__search"));
        assert!(!policy("").resolve(&Scope::of(GROUP)).allows("docs__search"));
    }

    #[test]
    fn message_actions_have_names_of_their_own_and_go_with_a_deny_of_message() {
        let react = serde_json::json!({"action": "react", "emoji": "👍"});
        assert_eq!(call_name("message", &react), "message:react");
        assert_eq!(
            call_name("message", &serde_json::json!({"action": "send"})),
            "message"
        );
        assert_eq!(
            call_name("message", &serde_json::json!({"text": "hi"})),
            "message"
        );
        assert_eq!(call_name("exec", &react), "exec");
        // Full: every action; messaging: all but pin; coding: none.
        let dm = policy("").resolve(&Scope::of(DM));
        assert!(MESSAGE_ACTIONS.iter().all(|a| dm.allows(a)));
        let messaging = policy("[tools]\nprofile = \"messaging\"\n").resolve(&Scope::of(DM));
        assert!(messaging.allows_call("message", &react));
        assert!(!messaging.allows("message:pin") && messaging.allows("message:poll"));
        let coding = policy("[tools]\nprofile = \"coding\"\n").resolve(&Scope::of(DM));
        assert!(!coding.offers("message") && !coding.allows_call("message", &react));
        // One action denied; or the whole tool.
        let p = policy("[tools]\ndeny = [\"message:delete\"]\n");
        let dm = p.resolve(&Scope::of(DM));
        assert!(dm.allows("message") && dm.allows("message:edit") && !dm.allows("message:delete"));
        let p = policy("[tools]\ndeny = [\"message\"]\n");
        let dm = p.resolve(&Scope::of(DM));
        assert!(!dm.offers("message") && !dm.allows_call("message", &react));
        // A group that may only react is offered the tool, for reacting alone.
        let p = policy("[tools]\nallow = [\"message:react\"]\n");
        let group = p.resolve(&Scope::of(GROUP));
        assert!(group.offers("message") && !group.allows("message"));
        assert!(group.allows_call("message", &react));
        assert!(!group.allows_call("message", &serde_json::json!({"text": "hi"})));
        assert!(!group.offers("exec"));
    }

    #[test]
    fn deny_wins_over_allow_and_groups_expand() {
        let p = policy(
            r#"
            [tools]
            group_profile = "minimal"
            allow = ["*"]
            deny = ["group:runtime"]
            "#,
        );
        let group = p.resolve(&Scope::of(GROUP));
        assert!(group.allows("write") && !group.allows("exec") && !group.allows("process"));
    }

    #[test]
    fn exec_approvals_resolve_group_then_channel_then_agent() {
        let p = policy(
            r#"
            [tools]
            exec_approvals = "ask"
            [tools.channels.discord]
            exec_approvals = "off"
            [tools.groups."discord:55"]
            exec_approvals = "ask"
            "#,
        );
        assert_eq!(p.resolve(&Scope::of(DM)).exec_approvals, ExecApprovals::Ask);
        assert_eq!(
            p.resolve(&Scope::of("agent:main:discord:direct:1"))
                .exec_approvals,
            ExecApprovals::Off
        );
        assert_eq!(
            p.resolve(&Scope::of(DISCORD_THREAD)).exec_approvals,
            ExecApprovals::Ask
        );
    }
}
