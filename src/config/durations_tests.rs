#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeSet;

use super::*;
use crate::config::{Config, CronEntry, HookConfig};

fn no_env(_: &str) -> Option<String> {
    None
}

/// The error `chela` gives for a config file of `text`, if any.
fn load_error(text: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    Config::load_with_env(Some(&path), &no_env)
        .err()
        .map(|e| e.to_string())
}

#[test]
fn a_duration_past_its_bound_is_refused_naming_the_key() {
    let hook = "[[hooks.before_tool]]\ncommand = [\"a\"]\n";
    let cases = [
        (
            "[agent]\nshutdown_grace_s = 18446744073709551615\n",
            "agent.shutdown_grace_s",
            ":2:1:",
        ),
        ("[agent]\ntimeout_s = 86401\n", "agent.timeout_s", ":2:1:"),
        (
            "[model]\nidle_timeout_s = 86401\n",
            "model.idle_timeout_s",
            ":2:1:",
        ),
        (
            "[queue]\ndebounce_ms = 86400001\n",
            "queue.debounce_ms",
            ":2:1:",
        ),
        (
            "[tools]\nexec_timeout_s = 86401\n",
            "tools.exec_timeout_s",
            ":2:1:",
        ),
        (
            "[tools]\napproval_timeout_s = 86401\n",
            "tools.approval_timeout_s",
            ":2:1:",
        ),
        (
            "[tools.web]\ntimeout_s = 86401\n",
            "tools.web.timeout_s",
            ":2:1:",
        ),
        (
            "[tools.browser]\ntimeout_s = 86401\n",
            "tools.browser.timeout_s",
            ":2:1:",
        ),
        (
            "[acp]\nask_timeout_s = 86401\n",
            "acp.ask_timeout_s",
            ":2:1:",
        ),
        (
            "[acp]\nbinding_idle_s = 31536001\n",
            "acp.binding_idle_s",
            ":2:1:",
        ),
        (
            "[acp]\nprocess_idle_s = 18446744073709551615\n",
            "acp.process_idle_s",
            ":2:1:",
        ),
        (
            "[channels.telegram]\npoll_timeout_s = 86401\n",
            "channels.telegram.poll_timeout_s",
            ":2:1:",
        ),
        ("[cluster]\nlease_s = 86401\n", "cluster.lease_s", ":2:1:"),
        ("[delivery]\nttl = \"366days\"\n", "delivery.ttl", ":2:1:"),
        (
            "[heartbeat]\nevery = \"366days\"\n",
            "heartbeat.every",
            ":2:1:",
        ),
    ];
    for (text, key, line) in cases {
        let err = load_error(text).unwrap_or_else(|| panic!("{key} was accepted"));
        assert!(
            err.contains(&format!("{line} {key}: must be at most")),
            "{err}"
        );
    }
    let err = load_error(&format!("{hook}timeout_s = 18446744073709551615\n")).unwrap();
    assert!(
        err.contains("hooks.before_tool[0].timeout_s: must be at most 86400 (seconds)"),
        "{err}"
    );
    let cron = "[[cron]]\nid = \"x\"\nevery = \"366days\"\nmessage = \"m\"\nsession = \"agent:main:main\"\n";
    let err = load_error(cron).unwrap();
    assert!(
        err.contains("cron[0].every: must be at most 365days"),
        "{err}"
    );
}

#[test]
fn a_duration_at_its_bound_is_accepted() {
    let text = "[agent]\nshutdown_grace_s = 86400\ntimeout_s = 86400\n\
                [acp]\nbinding_idle_s = 31536000\n[queue]\ndebounce_ms = 86400000\n\
                [delivery]\nttl = \"365days\"\n";
    assert_eq!(load_error(text), None);
}

/// Every key of `value` (a config as JSON), dotted, arrays indexed: `hooks.before_tool[0].timeout_s`.
fn keys_of(value: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(key.clone());
                keys_of(v, &key, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                keys_of(v, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_duration_key_of_the_config_is_bounded() {
    let mut config = Config::default();
    let hook = HookConfig {
        command: vec!["a".into()],
        ..HookConfig::default()
    };
    config.hooks.before_tool.push(hook.clone());
    config.hooks.after_tool.push(hook.clone());
    config.hooks.before_run.push(hook.clone());
    config.hooks.after_run.push(hook);
    config.cron.push(CronEntry {
        id: "x".into(),
        every: "1h".into(),
        message: "m".into(),
        ..CronEntry::default()
    });
    config.heartbeat.every = "30m".into();
    let mut all = BTreeSet::new();
    keys_of(&serde_json::to_value(&config).unwrap(), "", &mut all);
    let durations: BTreeSet<String> = all
        .into_iter()
        .filter(|k| {
            let last = k.rsplit('.').next().unwrap_or(k);
            last.ends_with("_s") || last.ends_with("_ms") || last == "ttl" || last == "every"
        })
        .collect();
    let bounded: BTreeSet<String> = keys(&config).into_iter().collect();
    assert_eq!(durations, bounded);
    check(&config).unwrap();
}
