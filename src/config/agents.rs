//! `[[agents]]` and `[[bindings]]`: more agents behind one gateway, and which chats each
//! answers (docs/agents.md). `[agent]` stays the default agent; each `[[agents]]`
//! entry is a second one with its own id, workspace, model, identity, tool policy and skills,
//! taking what it does not set from `[agent]`, `[model]` and `[tools]`. A binding routes the
//! chats it matches to an agent; the most specific matching binding wins, and a chat no
//! binding matches goes to the default agent.

use std::path::{Path, PathBuf};

use chela_channel::{ChatKind, Conversation};
use serde::{Deserialize, Serialize};

use super::tools::{SessionsReach, ToolProfile};

/// One `[[agents]]` entry: what differs from the default agent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    /// The agent id, `[a-z0-9][a-z0-9_-]{0,63}`: the second part of its session keys.
    pub id: String,
    /// Its working folder; default `~/.chela/workspace-<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Its model (as `[model] model`: `provider/model` or a model of `[model]`'s provider);
    /// default `[model] model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its fallbacks (as `[model] fallbacks`); default `[model] fallbacks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<Vec<String>>,
    /// The first line of its system prompt; default `[agent] identity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Only these skills (by name); empty: every skill found for its workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Its tool policy in direct chats; default `[tools] profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_profile: Option<ToolProfile>,
    /// Its tool policy in groups; default `[tools] group_profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_tool_profile: Option<ToolProfile>,
    /// Tools added to its profile; default `[tools] allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_allow: Option<Vec<String>>,
    /// Tools taken away; default `[tools] deny`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_deny: Option<Vec<String>>,
    /// Which sessions its runs reach through the session tools; default `[tools] sessions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_sessions: Option<SessionsReach>,
    /// Only these `[mcp.servers]` give it tools; default `[agent] mcp` (unset: every server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
}

/// One `[[bindings]]` entry: chats that go to `agent`. Every field set must match; an
/// unset field matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The agent id (`[agent] id` or an `[[agents]]` id).
    pub agent: String,
    /// The channel: `telegram`, `discord`, `terminal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The channel's account (`default` unless the channel runs several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// A person: the sender's id on the channel, in direct chats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// A group chat or guild channel id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// A thread or forum topic id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

impl Binding {
    /// How specific a match of this binding is, or `None` when it does not match a message
    /// from `sender` in `conversation`: thread over peer or group over account over channel.
    pub fn score(&self, conversation: &Conversation, sender: &str) -> Option<u32> {
        let direct = conversation.kind == ChatKind::Direct;
        let parts = [
            (
                self.channel.as_deref(),
                Some(conversation.channel.as_str()),
                1,
            ),
            (
                self.account.as_deref(),
                Some(conversation.account.as_str()),
                2,
            ),
            (self.peer.as_deref(), direct.then_some(sender), 8),
            (
                self.group.as_deref(),
                (!direct).then_some(conversation.chat_id.as_str()),
                8,
            ),
            (
                self.thread.as_deref(),
                conversation.thread_id.as_deref(),
                16,
            ),
        ];
        let mut score = 0;
        for (wanted, actual, weight) in parts {
            if let Some(wanted) = wanted {
                if actual != Some(wanted) {
                    return None;
                }
                score += weight;
            }
        }
        Some(score)
    }

    /// Whether it names nothing to match (it would take every chat).
    pub fn is_empty(&self) -> bool {
        [
            &self.channel,
            &self.account,
            &self.peer,
            &self.group,
            &self.thread,
        ]
        .iter()
        .all(|f| f.is_none())
    }
}

/// The agent of the most specific of `bindings` that matches, first listed on a tie; `None`
/// when none matches (the default agent answers).
pub fn route<'a>(
    bindings: &'a [Binding],
    conversation: &Conversation,
    sender: &str,
) -> Option<&'a str> {
    let mut best: Option<(u32, &Binding)> = None;
    for binding in bindings {
        if let Some(score) = binding.score(conversation, sender)
            && best.is_none_or(|(top, _)| score > top)
        {
            best = Some((score, binding));
        }
    }
    best.map(|(_, b)| b.agent.as_str())
}

impl super::Config {
    /// The id of the agent that answers `sender` in `conversation`: the most specific
    /// binding's, else `[agent] id`.
    pub fn agent_id_for(&self, conversation: &Conversation, sender: &str) -> &str {
        route(&self.bindings, conversation, sender).unwrap_or(&self.agent.id)
    }

    /// Every agent id, the default one first.
    pub fn agent_ids(&self) -> Vec<&str> {
        std::iter::once(self.agent.id.as_str())
            .chain(self.agents.iter().map(|a| a.id.as_str()))
            .collect()
    }

    /// The configuration as `[[agents]]` entry `id` sees it: `[agent]`, `[model]` and
    /// `[tools]` with the entry's settings in their place; `None` for an id no entry has.
    pub fn for_agent(&self, id: &str) -> Option<super::Config> {
        let entry = self.agents.iter().find(|a| a.id == id)?;
        let mut config = self.clone();
        config.agent.id = entry.id.clone();
        if let Some(workspace) = &entry.workspace {
            config.agent.workspace = workspace.clone();
        }
        if let Some(identity) = &entry.identity {
            config.agent.identity = identity.clone();
        }
        if let Some(model) = &entry.model {
            config.model.model = model.clone();
        }
        if let Some(fallbacks) = &entry.fallbacks {
            config.model.fallbacks = fallbacks.clone();
        }
        config.agent.skills = entry.skills.clone();
        let tools = &mut config.tools;
        if let Some(profile) = entry.tool_profile {
            tools.profile = profile;
        }
        if let Some(profile) = entry.group_tool_profile {
            tools.group_profile = profile;
        }
        if let Some(allow) = &entry.tools_allow {
            tools.allow = allow.clone();
        }
        if let Some(deny) = &entry.tools_deny {
            tools.deny = deny.clone();
        }
        if let Some(reach) = entry.tools_sessions {
            tools.sessions = reach;
        }
        if let Some(servers) = &entry.mcp {
            config.agent.mcp = Some(servers.clone());
        }
        Some(config)
    }

    /// `[tools] sessions` as agent `id` sees it: its `[[agents]]` entry's `tools_sessions`,
    /// else `[tools] sessions` (the default agent, or an id no entry has).
    pub fn sessions_reach(&self, id: &str) -> SessionsReach {
        self.agents
            .iter()
            .find(|a| a.id == id)
            .and_then(|a| a.tools_sessions)
            .unwrap_or(self.tools.sessions)
    }
}

/// Checks `[[agents]]` and `[[bindings]]` beside the default agent `default_id`:
/// `Err((key, message))` names the key at fault. (Workspaces: [`check_workspaces`], once
/// paths are resolved.)
pub fn check(
    default_id: &str,
    agents: &[AgentEntry],
    bindings: &[Binding],
) -> Result<(), (String, String)> {
    let mut ids = vec![default_id];
    for (i, agent) in agents.iter().enumerate() {
        if !crate::domain::session_key::is_valid_agent_id(&agent.id) {
            return Err((
                format!("agents[{i}].id"),
                format!(
                    "{:?} is not a valid agent id; expected [a-z0-9][a-z0-9_-]{{0,63}}",
                    agent.id
                ),
            ));
        }
        if ids.contains(&agent.id.as_str()) {
            return Err((
                format!("agents[{i}].id"),
                format!("{:?} is used twice (agent.id counts too)", agent.id),
            ));
        }
        ids.push(&agent.id);
    }
    for (i, binding) in bindings.iter().enumerate() {
        if !ids.contains(&binding.agent.as_str()) {
            return Err((
                format!("bindings[{i}].agent"),
                format!(
                    "{:?} is not an agent; known: {}",
                    binding.agent,
                    ids.join(", ")
                ),
            ));
        }
        if binding.is_empty() {
            return Err((
                format!("bindings[{i}]"),
                "names nothing to match: set channel, account, peer, group or thread".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Refuses two agents whose workspaces are the same folder or one inside the other: each
/// agent's file tools, memory and skills would reach the other's files. On resolved paths
/// (absolute; `.` and `..` are taken lexically; symbolic links are not followed).
pub fn check_workspaces(
    default_workspace: &Path,
    agents: &[AgentEntry],
) -> Result<(), (String, String)> {
    let mut seen: Vec<(String, PathBuf)> =
        vec![("agent.workspace".to_owned(), lexical(default_workspace))];
    for (i, agent) in agents.iter().enumerate() {
        let Some(workspace) = agent.workspace.as_deref().map(lexical) else {
            continue;
        };
        if let Some((other, _)) = seen
            .iter()
            .find(|(_, w)| w.starts_with(&workspace) || workspace.starts_with(w))
        {
            return Err((
                format!("agents[{i}].workspace"),
                format!(
                    "{} overlaps {other}: each agent needs a folder of its own, \
                     not inside another's",
                    workspace.display()
                ),
            ));
        }
        seen.push((format!("agents[{i}].workspace"), workspace));
    }
    Ok(())
}

/// `path` with `.` dropped and each `..` taking away the part before it.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn conversation(
        channel: &str,
        kind: ChatKind,
        chat: &str,
        thread: Option<&str>,
    ) -> Conversation {
        Conversation {
            channel: channel.into(),
            account: "default".into(),
            kind,
            chat_id: chat.into(),
            thread_id: thread.map(Into::into),
        }
    }

    fn binding(agent: &str, f: impl FnOnce(&mut Binding)) -> Binding {
        let mut b = Binding {
            agent: agent.to_owned(),
            ..Binding::default()
        };
        f(&mut b);
        b
    }

    #[test]
    fn the_most_specific_binding_wins_and_unmatched_chats_go_to_the_default() {
        let bindings = [
            binding("tg", |b| b.channel = Some("telegram".into())),
            binding("ann", |b| {
                b.channel = Some("telegram".into());
                b.peer = Some("42".into());
            }),
            binding("team", |b| b.group = Some("-100".into())),
            binding("topic", |b| {
                b.group = Some("-100".into());
                b.thread = Some("7".into());
            }),
        ];
        let dm = |id: &str| conversation("telegram", ChatKind::Direct, id, None);
        assert_eq!(route(&bindings, &dm("42"), "42"), Some("ann"));
        assert_eq!(route(&bindings, &dm("43"), "43"), Some("tg"));
        let group = conversation("telegram", ChatKind::Group, "-100", None);
        assert_eq!(route(&bindings, &group, "42"), Some("team"));
        let topic = conversation("telegram", ChatKind::Group, "-100", Some("7"));
        assert_eq!(route(&bindings, &topic, "42"), Some("topic"));
        let discord = conversation("discord", ChatKind::Channel, "555", None);
        assert_eq!(route(&bindings, &discord, "42"), None);
        // A peer binding does not take a group message from that person.
        let other_group = conversation("telegram", ChatKind::Group, "-200", None);
        assert_eq!(route(&bindings, &other_group, "42"), Some("tg"));
    }

    #[test]
    fn ties_go_to_the_first_listed() {
        let bindings = [
            binding("first", |b| b.channel = Some("discord".into())),
            binding("second", |b| b.channel = Some("discord".into())),
        ];
        let c = conversation("discord", ChatKind::Channel, "1", None);
        assert_eq!(route(&bindings, &c, "9"), Some("first"));
    }

    #[test]
    fn an_agents_config_takes_its_own_settings_and_the_rest_from_the_default() {
        let text = r#"
[model]
model = "base"
[agent]
workspace = "/srv/chela/workspace"
[tools]
profile = "messaging"
[[agents]]
id = "coder"
model = "codex"
identity = "You are Coder."
tool_profile = "coding"
tools_sessions = "all"
skills = ["review"]
[[agents]]
id = "quiet"
[[bindings]]
agent = "coder"
channel = "discord"
group = "55"
"#;
        let mut config = super::super::Config::from_toml_str(text, "t.toml", &|_| None).unwrap();
        config.resolve_paths(std::path::Path::new("/etc/chela"), None);
        config.validate().unwrap();
        assert_eq!(config.agent_ids(), ["main", "coder", "quiet"]);
        let coder = config.for_agent("coder").unwrap();
        assert_eq!(coder.agent.id, "coder");
        assert_eq!(coder.model.model, "codex");
        assert_eq!(coder.agent.identity, "You are Coder.");
        assert_eq!(coder.tools.profile, ToolProfile::Coding);
        assert_eq!(coder.agent.skills, ["review"]);
        assert_eq!(
            coder.agent.workspace,
            PathBuf::from("/srv/chela/workspace-coder")
        );
        let quiet = config.for_agent("quiet").unwrap();
        assert_eq!(quiet.model.model, "base");
        assert_eq!(quiet.tools.profile, ToolProfile::Messaging);
        assert!(config.for_agent("main").is_none());
        assert_eq!(coder.tools.sessions, SessionsReach::All);
        assert_eq!(quiet.tools.sessions, SessionsReach::Own);
        let reach = ["main", "coder", "quiet"].map(|id| config.sessions_reach(id));
        assert_eq!(
            reach,
            [SessionsReach::Own, SessionsReach::All, SessionsReach::Own]
        );
        let channel = conversation("discord", ChatKind::Channel, "55", None);
        assert_eq!(config.agent_id_for(&channel, "1"), "coder");
        let other = conversation("discord", ChatKind::Channel, "56", None);
        assert_eq!(config.agent_id_for(&other, "1"), "main");
    }

    #[test]
    fn checks_name_the_key_at_fault() {
        let agent = |id: &str| AgentEntry {
            id: id.to_owned(),
            ..AgentEntry::default()
        };
        let to = |id: &str| binding(id, |b| b.channel = Some("discord".into()));
        assert!(check("main", &[agent("coder")], &[to("coder"), to("main")]).is_ok());
        assert_eq!(
            check("main", &[agent("Bad")], &[]).unwrap_err().0,
            "agents[0].id"
        );
        assert_eq!(
            check("main", &[agent("main")], &[]).unwrap_err().0,
            "agents[0].id"
        );
        assert_eq!(
            check("main", &[agent("coder")], &[to("nobody")])
                .unwrap_err()
                .0,
            "bindings[0].agent"
        );
        let empty = binding("main", |_| {});
        assert_eq!(check("main", &[], &[empty]).unwrap_err().0, "bindings[0]");
    }

    #[test]
    fn two_agents_may_not_share_or_nest_workspaces() {
        let at = |id: &str, w: &str| AgentEntry {
            id: id.to_owned(),
            workspace: Some(PathBuf::from(w)),
            ..AgentEntry::default()
        };
        let w = Path::new("/srv/ws");
        assert!(check_workspaces(w, &[at("a", "/srv/ws-a"), at("b", "/srv/b")]).is_ok());
        for (agents, key, other) in [
            (
                vec![at("a", "/srv/ws")],
                "agents[0].workspace",
                "agent.workspace",
            ),
            (
                vec![at("a", "/srv/ws/a")],
                "agents[0].workspace",
                "agent.workspace",
            ),
            (
                vec![at("a", "/srv")],
                "agents[0].workspace",
                "agent.workspace",
            ),
            (
                vec![at("a", "/x/a"), at("b", "/x/a/b")],
                "agents[1].workspace",
                "agents[0].workspace",
            ),
        ] {
            let (at_fault, message) = check_workspaces(w, &agents).unwrap_err();
            assert_eq!(at_fault, key);
            assert!(message.contains(other), "{message}");
        }
    }
}
