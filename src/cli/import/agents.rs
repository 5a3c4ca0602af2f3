//! OpenClaw's agents besides the default one -> chela's `[[agents]]`, and its route
//! `bindings` -> `[[bindings]]`. What chela cannot express (a guild, team or role match, ACP
//! bindings, a model of another provider, other agent keys) is listed, not dropped.

use std::path::Path;

use serde_json::Value;
use toml::{Table, Value as Toml};

use chela::domain::session_key::normalize_agent_id;

/// chela's tool profiles, which share OpenClaw's names.
const PROFILES: [&str; 4] = ["minimal", "messaging", "coding", "full"];

/// Keys of an OpenClaw agent entry that are mapped (or need no mapping).
const MAPPED_KEYS: [&str; 7] = [
    "id",
    "default",
    "name",
    "workspace",
    "model",
    "skills",
    "tools",
];

/// `[[agents]]` entries for OpenClaw's agents other than `default_id`, each an agent whose
/// model is of `provider` (the default's, `[model]`); the ids made; lines not carried over.
pub fn agents(
    openclaw: &Value,
    default_id: &str,
    provider: Option<&str>,
    dir: &Path,
) -> (Vec<Toml>, Vec<String>, Vec<String>) {
    let (mut entries, mut ids, mut not_carried) = (Vec::new(), Vec::new(), Vec::new());
    for (id, agent) in listed(&openclaw["agents"]) {
        if id == default_id {
            continue;
        }
        let chela_id = normalize_agent_id(&id);
        let mut table = Table::new();
        table.insert("id".into(), chela_id.clone().into());
        let workspace = agent["workspace"]
            .as_str()
            .map(|w| super::values::openclaw_path(w, dir))
            .unwrap_or_else(|| dir.join(format!("workspace-{id}")).display().to_string());
        table.insert("workspace".into(), workspace.into());
        if let Some(model) = super::values::model_ref(&agent["model"]) {
            match model.split_once('/') {
                Some((p, name)) if Some(p) == provider => {
                    table.insert("model".into(), name.into());
                }
                _ => not_carried.push(format!(
                    "agent {id}: model {model} is not of [model]'s provider; it uses [model]'s model"
                )),
            }
        }
        if let Some(skills) = strings(&agent["skills"]) {
            table.insert("skills".into(), skills.into());
        }
        tools(&agent["tools"], &id, &mut table, &mut not_carried);
        for key in agent.as_object().into_iter().flat_map(|o| o.keys()) {
            if !MAPPED_KEYS.contains(&key.as_str()) {
                not_carried.push(format!("agent {id}: {key} not carried over"));
            }
        }
        ids.push(chela_id);
        entries.push(Toml::Table(table));
    }
    (entries, ids, not_carried)
}

/// Every agent of `agents.entries` (id -> entry) or the legacy `agents.list`.
fn listed(agents: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    if let Some(entries) = agents["entries"].as_object() {
        out.extend(entries.iter().map(|(id, a)| (id.clone(), a.clone())));
    }
    if let Some(list) = agents["list"].as_array() {
        out.extend(
            list.iter()
                .filter_map(|a| Some((a["id"].as_str()?.to_owned(), a.clone()))),
        );
    }
    out
}

/// An agent's `tools` (`profile`, `allow`, `deny`) into its entry.
fn tools(tools: &Value, id: &str, table: &mut Table, not_carried: &mut Vec<String>) {
    if let Some(profile) = tools["profile"].as_str() {
        match PROFILES.contains(&profile) {
            true => {
                table.insert("tool_profile".into(), profile.into());
            }
            false => not_carried.push(format!("agent {id}: tool profile {profile}")),
        }
    }
    for (from, to) in [("allow", "tools_allow"), ("deny", "tools_deny")] {
        if let Some(names) = strings(&tools[from]) {
            table.insert(to.into(), names.into());
        }
    }
}

/// A JSON array of strings.
fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// `[[bindings]]` for OpenClaw's route `bindings` whose agent is among `ids`; lines not
/// carried over.
pub fn bindings(bindings: &Value, ids: &[String]) -> (Vec<Toml>, Vec<String>) {
    let (mut out, mut not_carried) = (Vec::new(), Vec::new());
    for (i, binding) in bindings.as_array().into_iter().flatten().enumerate() {
        match binding_table(binding, ids) {
            Ok(table) => out.push(Toml::Table(table)),
            Err(why) => not_carried.push(format!("bindings[{i}]: {why}")),
        }
    }
    (out, not_carried)
}

/// One route binding as a `[[bindings]]` table, or why it cannot be one.
fn binding_table(binding: &Value, ids: &[String]) -> Result<Table, String> {
    if binding["type"].as_str().is_some_and(|t| t != "route") {
        return Err("an ACP binding (bind coding agents with /acp spawn --bind here)".into());
    }
    let agent = normalize_agent_id(binding["agentId"].as_str().unwrap_or(""));
    if !ids.contains(&agent) {
        return Err(format!("agent {agent} is not carried over"));
    }
    let m = &binding["match"];
    for key in ["guildId", "teamId", "roles"] {
        if !m[key].is_null() {
            return Err(format!(
                "a {key} match (chela matches channel, account, peer, group, thread)"
            ));
        }
    }
    let mut table = Table::new();
    table.insert("agent".into(), agent.into());
    if let Some(channel) = m["channel"].as_str() {
        table.insert("channel".into(), channel.to_lowercase().into());
    }
    if let Some(account) = m["accountId"].as_str().filter(|a| *a != "*") {
        table.insert("account".into(), account.into());
    }
    if let Some(id) = m["peer"]["id"].as_str() {
        let field = match m["peer"]["kind"].as_str() {
            Some("direct") => "peer",
            _ => "group",
        };
        table.insert(field.into(), id.into());
    }
    match table.len() > 1 {
        true => Ok(table),
        false => Err("matches nothing chela can name".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn other_agents_and_route_bindings_map_and_the_rest_is_listed() {
        let openclaw: Value = json5::from_str(
            r#"{ agents: { entries: {
                main: { name: "Main" },
                ops: { workspace: "~/.openclaw/workspace-ops", model: "fake/fake-2",
                       tools: { profile: "coding", deny: ["exec"] }, skills: ["gh"], heartbeat: {} },
                Far: { model: "other/x" } } },
              bindings: [
                { agentId: "ops", match: { channel: "telegram", peer: { kind: "direct", id: "42" } } },
                { agentId: "ops", match: { channel: "discord", accountId: "*", peer: { kind: "channel", id: "555" } } },
                { agentId: "ops", match: { channel: "discord", guildId: "9" } },
                { type: "acp", agentId: "ops", match: { channel: "discord" } },
                { agentId: "ghost", match: { channel: "telegram" } } ] }"#,
        )
        .unwrap();
        let dir = Path::new("/oc");
        let (entries, ids, mut not_carried) = agents(&openclaw, "main", Some("fake"), dir);
        assert_eq!(ids, ["ops", "far"]);
        let ops = entries[0].as_table().unwrap();
        assert_eq!(ops["workspace"].as_str(), Some("/oc/workspace-ops"));
        assert_eq!(ops["model"].as_str(), Some("fake-2"));
        assert_eq!(ops["tool_profile"].as_str(), Some("coding"));
        assert_eq!(ops["tools_deny"].as_array().unwrap().len(), 1);
        let far = entries[1].as_table().unwrap();
        assert_eq!(far["workspace"].as_str(), Some("/oc/workspace-Far"));
        assert!(far.get("model").is_none());
        let (bound, skipped) = bindings(&openclaw["bindings"], &ids);
        not_carried.extend(skipped);
        assert_eq!(bound.len(), 2);
        assert_eq!(bound[0].as_table().unwrap()["peer"].as_str(), Some("42"));
        let second = bound[1].as_table().unwrap();
        assert_eq!(second["group"].as_str(), Some("555"));
        assert!(second.get("account").is_none());
        for expected in [
            "heartbeat",
            "other/x",
            "bindings[2]",
            "bindings[3]",
            "bindings[4]",
        ] {
            assert!(
                not_carried.iter().any(|l| l.contains(expected)),
                "{expected}: {not_carried:#?}"
            );
        }
    }
}
