//! OpenClaw's `openclaw.json` (JSON5) -> a chela `config.toml`: model provider and model,
//! workspace, queue, Telegram and Discord tokens, policies and allowlists. Keys with no chela
//! counterpart are listed, not dropped silently.

use super::values::{model_ref, openclaw_path};
use serde_json::Value;
use toml::{Table, Value as Toml};

/// A chela config made from OpenClaw's, and what it could not hold.
pub struct Mapped {
    /// The TOML text.
    pub toml: String,
    /// One line per setting not carried over.
    pub not_carried: Vec<String>,
}

/// Maps OpenClaw's config (already parsed from JSON5) read from the state folder `dir`: a
/// workspace under `~/.openclaw` is taken to be under `dir`.
pub fn map(openclaw: &Value, dir: &std::path::Path) -> Mapped {
    let mut out = Table::new();
    let mut not_carried = Vec::new();
    let (agent_id, agent) = default_agent(&openclaw["agents"]);
    let defaults = &openclaw["agents"]["defaults"];
    let model_ref = model_ref(&agent["model"]).or_else(|| model_ref(&defaults["model"]));
    let provider = model_ref
        .as_deref()
        .and_then(|r| r.split_once('/'))
        .map(|p| p.0);
    let (agents, ids, skipped) = super::agents::agents(openclaw, &agent_id, provider, dir);
    not_carried.extend(skipped);
    let (bindings, skipped) = super::agents::bindings(&openclaw["bindings"], &ids);
    not_carried.extend(skipped);
    if let Some(model) = model_ref.and_then(|r| model_table(openclaw, &r, &mut not_carried)) {
        out.insert("model".into(), Toml::Table(model));
    }
    let mut agent_table = Table::new();
    agent_table.insert("id".into(), agent_id.clone().into());
    let workspace = agent["workspace"]
        .as_str()
        .or(defaults["workspace"].as_str());
    if let Some(workspace) = workspace {
        agent_table.insert("workspace".into(), openclaw_path(workspace, dir).into());
    }
    out.insert("agent".into(), Toml::Table(agent_table));
    if !agents.is_empty() {
        out.insert("agents".into(), Toml::Array(agents));
    }
    if !bindings.is_empty() {
        out.insert("bindings".into(), Toml::Array(bindings));
    }
    if let Some(queue) = queue(&openclaw["messages"]["queue"]) {
        out.insert("queue".into(), Toml::Table(queue));
    }
    let mut channels = Table::new();
    for (name, token_key) in [("telegram", "botToken"), ("discord", "token")] {
        let source = &openclaw["channels"][name];
        if source.is_object() && source["enabled"] != Value::Bool(false) {
            let (table, skipped) = channel(name, source, token_key);
            channels.insert(name.into(), Toml::Table(table));
            not_carried.extend(skipped);
        }
    }
    if let Some(others) = openclaw["channels"].as_object() {
        for name in others
            .keys()
            .filter(|k| !matches!(k.as_str(), "telegram" | "discord"))
        {
            not_carried.push(format!("channels.{name}: chela has no {name} channel"));
        }
    }
    if !channels.is_empty() {
        out.insert("channels".into(), Toml::Table(channels));
    }
    if let Some(top) = openclaw.as_object() {
        for key in top.keys() {
            if !matches!(
                key.as_str(),
                "agents" | "bindings" | "models" | "messages" | "channels" | "meta" | "wizard"
            ) {
                not_carried.push(format!("{key}: no chela counterpart"));
            }
        }
    }
    let toml = format!(
        "# Written by `chela import openclaw` from OpenClaw's openclaw.json.\n{}",
        toml::to_string(&out).unwrap_or_default()
    );
    Mapped { toml, not_carried }
}

/// The default agent: `main` (or the first) of `agents.entries`, or the legacy `agents.list`
/// entry marked `default: true` (else its first); `("main", {})` when none is configured.
fn default_agent(agents: &Value) -> (String, Value) {
    if let Some(entries) = agents["entries"].as_object() {
        if let Some(main) = entries.get("main") {
            return ("main".into(), main.clone());
        }
        if let Some((id, entry)) = entries.iter().next() {
            return (id.clone(), entry.clone());
        }
    }
    if let Some(list) = agents["list"].as_array() {
        let chosen = list
            .iter()
            .find(|a| a["default"] == Value::Bool(true))
            .or(list.first());
        if let Some(agent) = chosen {
            return (
                agent["id"].as_str().unwrap_or("main").to_string(),
                agent.clone(),
            );
        }
    }
    ("main".into(), Value::Null)
}

/// `[model]` for `provider/model`, using `models.providers.<provider>` when configured.
fn model_table(openclaw: &Value, model_ref: &str, not_carried: &mut Vec<String>) -> Option<Table> {
    let (provider, model) = model_ref.split_once('/').unwrap_or(("openai", model_ref));
    let custom = &openclaw["models"]["providers"][provider];
    let api = custom["api"].as_str().unwrap_or(provider);
    let kind = if api.starts_with("anthropic") {
        "anthropic"
    } else if api.starts_with("openai") {
        "openai"
    } else {
        not_carried.push(format!(
            "model provider {provider} (api {api}): chela speaks OpenAI-compatible and Anthropic APIs; set [model] by hand"
        ));
        return None;
    };
    let mut table = Table::new();
    table.insert("provider".into(), kind.into());
    if let Some(url) = custom["baseUrl"].as_str() {
        table.insert("base_url".into(), url.into());
    }
    if let Some(key) = custom["apiKey"].as_str() {
        table.insert("api_key".into(), key.into());
    }
    table.insert("model".into(), model.into());
    let entry = custom["models"]
        .as_array()
        .and_then(|models| models.iter().find(|m| m["id"] == model));
    if let Some(entry) = entry {
        for (from, to) in [
            ("maxTokens", "max_tokens"),
            ("contextWindow", "context_window"),
        ] {
            if let Some(n) = entry[from].as_i64() {
                table.insert(to.into(), n.into());
            }
        }
    }
    Some(table)
}

/// `[queue]` from `messages.queue`.
fn queue(queue: &Value) -> Option<Table> {
    let mut table = Table::new();
    for (from, to) in [("mode", "mode"), ("drop", "drop")] {
        if let Some(text) = queue[from].as_str() {
            table.insert(to.into(), text.into());
        }
    }
    for (from, to) in [("cap", "cap"), ("debounceMs", "debounce_ms")] {
        if let Some(n) = queue[from].as_i64() {
            table.insert(to.into(), n.into());
        }
    }
    (!table.is_empty()).then_some(table)
}

/// `[channels.<name>]`, and the keys it could not hold.
fn channel(name: &str, source: &Value, token_key: &str) -> (Table, Vec<String>) {
    let mut table = Table::new();
    let mut skipped = Vec::new();
    if let Some(token) = source[token_key].as_str() {
        table.insert("token".into(), token.into());
    }
    if source["tokenFile"].is_string() {
        skipped.push(format!(
            "channels.{name}.tokenFile: put the token in [channels.{name}] token or its env variable"
        ));
    }
    let dm_policy = source["dmPolicy"]
        .as_str()
        .or(source["dm"]["policy"].as_str());
    if let Some(policy) = dm_policy {
        table.insert("dm_policy".into(), policy.into());
    }
    match source["groupPolicy"].as_str() {
        Some(policy @ ("open" | "allowlist")) => {
            table.insert("group_policy".into(), policy.into());
        }
        Some(other) => skipped.push(format!(
            "channels.{name}.groupPolicy {other:?}: chela has allowlist | open"
        )),
        None => {}
    }
    for (from, to) in [
        ("allowFrom", "allow_from"),
        ("groupAllowFrom", "group_allow_from"),
    ] {
        if let Some(ids) = source[from].as_array() {
            let ids: Vec<Toml> = ids.iter().map(|v| id_text(v).into()).collect();
            table.insert(to.into(), Toml::Array(ids));
        }
    }
    if name == "discord"
        && let Some(guilds) = source["guilds"].as_object()
    {
        let ids: Vec<Toml> = guilds.keys().map(|k| k.clone().into()).collect();
        table.insert("guilds".into(), Toml::Array(ids));
        skipped.push("channels.discord.guilds.*: per-guild settings (only the guild ids)".into());
    }
    if source["accounts"].is_object() {
        skipped.push(format!(
            "channels.{name}.accounts: chela runs one bot per channel"
        ));
    }
    (table, skipped)
}

/// An id as text (OpenClaw accepts numbers or strings).
pub fn id_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_config_maps_to_a_chela_config_that_loads() {
        let text = include_str!("../../../tests/fixtures/openclaw/state/openclaw.json");
        let openclaw: Value = json5::from_str(text).unwrap();
        let mapped = map(&openclaw, std::path::Path::new("/oc"));
        assert!(
            mapped.toml.contains("workspace = \"/oc/workspace\""),
            "{}",
            mapped.toml
        );
        let table: Table = toml::from_str(&mapped.toml).unwrap();
        assert_eq!(table["model"]["provider"].as_str(), Some("openai"));
        assert_eq!(
            table["model"]["base_url"].as_str(),
            Some("http://127.0.0.1:18991/v1")
        );
        assert_eq!(table["model"]["model"].as_str(), Some("fake-1"));
        assert_eq!(table["queue"]["mode"].as_str(), Some("collect"));
        let telegram = &table["channels"]["telegram"];
        assert_eq!(
            telegram["token"].as_str(),
            Some("123456:telegram-fixture-token")
        );
        assert_eq!(telegram["group_policy"].as_str(), Some("open"));
        assert_eq!(
            table["channels"]["discord"]["dm_policy"].as_str(),
            Some("allowlist")
        );
        let ops = &table["agents"].as_array().unwrap()[0];
        assert_eq!(ops["id"].as_str(), Some("ops"));
        assert_eq!(ops["workspace"].as_str(), Some("/oc/workspace-ops"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, &mapped.toml).unwrap();
        let loaded = chela::config::Config::load_with_env(Some(&path), &|_| None).unwrap();
        assert_eq!(loaded.config.queue.cap, 10);
    }
}
