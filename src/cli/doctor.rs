//! `chela doctor`: checks config, store and model provider, and says what to fix.

use std::process::ExitCode;
use std::time::Duration;

use chela::config::{LoadedConfig, ProviderKind};
use chela::store::{Store, StoreError};

/// Runs every check; exits 1 when one fails.
pub async fn doctor(loaded: LoadedConfig) -> ExitCode {
    let mut ok = true;
    let mut report = |good: bool, what: &str, detail: String| {
        ok &= good;
        println!("{} {what}: {detail}", if good { "ok  " } else { "FAIL" });
    };
    report(
        true,
        "config",
        match &loaded.source {
            Some(path) => format!("{} parsed", path.display()),
            None => "no config file; embedded defaults (see config.example.toml)".into(),
        },
    );
    let path = &loaded.config.store.path;
    match Store::open_with(
        path,
        loaded.config.store.accept_rollback,
        loaded.config.store.cache_bytes(),
    ) {
        Ok(store) => report(
            true,
            "store",
            format!(
                "{} ({} sessions)",
                path.display(),
                store.list_sessions().map(|s| s.len()).unwrap_or(0)
            ),
        ),
        Err(StoreError::Locked { .. }) => {
            // A running gateway holds it: the store is fine if that gateway answers.
            let reached = async {
                let mut client = super::rpc::connect(&loaded).await?;
                client.call("status", serde_json::json!({})).await
            }
            .await;
            match reached {
                Ok(_) => report(
                    true,
                    "store",
                    format!(
                        "{} (in use by the running gateway, which answers)",
                        path.display()
                    ),
                ),
                Err(e) => report(
                    false,
                    "store",
                    format!(
                        "{} is in use by another chela process that does not answer: {e}",
                        path.display()
                    ),
                ),
            }
        }
        Err(e) => report(
            false,
            "store",
            format!("{e}; stop the other chela process or set store.path"),
        ),
    }
    let settings = chela::agent::provider_settings(&loaded.config);
    match chela::agent::provider::settings::build(&settings) {
        Err(e) => report(false, "model", e.to_string()),
        Ok(provider) if settings.kind == ProviderKind::Echo => report(
            true,
            "model",
            format!(
                "{} (echo answers with your own text: a wiring check, not a model)",
                provider.name()
            ),
        ),
        Ok(provider) => {
            let base = settings.effective_base_url();
            let (good, detail) =
                reachable(&settings.kind, &base, settings.effective_api_key()).await;
            report(
                good,
                "model",
                format!(
                    "{}/{} at {base}: {detail}",
                    provider.name(),
                    provider.model()
                ),
            );
        }
    }
    let sandbox = chela::sandbox::ExecSandbox::from_config(&loaded.config);
    match sandbox.describe() {
        (true, detail) => report(true, "exec sandbox", detail),
        // exec still works, each command after the owner's approval.
        (false, detail) if sandbox.needs_approval() => println!("warn exec sandbox: {detail}"),
        (false, detail) => report(false, "exec sandbox", detail),
    }
    let config = &loaded.config;
    for (name, key, mode) in [
        ("acp sandbox", "[acp] sandbox", config.acp.sandbox),
        ("hooks sandbox", "[hooks] sandbox", config.hooks.sandbox),
    ] {
        match chela::sandbox::ChildSandbox::from_config(mode, config).describe(key) {
            (true, detail) => report(true, name, detail),
            // They still run, unconfined: a warning, not a failure.
            (false, detail) => println!("warn {name}: {detail}"),
        }
    }
    let telegram = &loaded.config.channels.telegram;
    if telegram.token.trim().is_empty() {
        report(
            true,
            "telegram",
            "no token (set TELEGRAM_BOT_TOKEN to run the Telegram channel)".into(),
        );
    } else {
        let (good, detail) = telegram_me(&telegram.api_url, telegram.token.trim()).await;
        report(good, "telegram", detail);
    }
    let acp = &loaded.config.acp;
    let path = std::env::var("PATH").ok();
    for (name, harness) in acp.harnesses() {
        let installed = chela::acp::harness::installed(&harness, path.as_deref());
        // A configured agent must start; a built-in one is optional.
        let required = acp.agents.contains_key(&name);
        report(
            installed.is_usable() || !required,
            &format!("acp {name}"),
            installed.to_string(),
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Asks the Bot API who the token belongs to.
async fn telegram_me(api_url: &str, token: &str) -> (bool, String) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => return (false, e.to_string()),
    };
    let url = format!("{}/bot{token}/getMe", api_url.trim_end_matches('/'));
    match client.post(&url).send().await {
        Ok(resp) if resp.status().is_success() => {
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            let name = body["result"]["username"].as_str().unwrap_or("?");
            let privacy = if body["result"]["can_read_all_group_messages"] == true {
                "privacy mode off: sees every group message"
            } else {
                "privacy mode on: in groups it sees only commands, mentions and replies"
            };
            (true, format!("@{name} ({privacy})"))
        }
        Ok(resp) if resp.status().as_u16() == 401 || resp.status().as_u16() == 404 => (
            false,
            "the Bot API refused the token; copy it again from @BotFather".into(),
        ),
        Ok(resp) => (false, format!("getMe answered {}", resp.status())),
        Err(_) => (
            false,
            format!("cannot reach {api_url}; check channels.telegram.api_url and the network"),
        ),
    }
}

/// Asks the provider's model list, which needs the key but costs no tokens.
async fn reachable(kind: &ProviderKind, base: &str, key: Option<&str>) -> (bool, String) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => return (false, e.to_string()),
    };
    let (url, request) = match kind {
        ProviderKind::Anthropic => {
            let url = format!("{}/v1/models", base.trim_end_matches("/v1"));
            let mut req = client.get(&url).header("anthropic-version", "2023-06-01");
            if let Some(key) = key {
                req = req.header("x-api-key", key);
            }
            (url, req)
        }
        _ => {
            let url = format!("{base}/models");
            let mut req = client.get(&url);
            if let Some(key) = key {
                req = req.bearer_auth(key);
            }
            (url, req)
        }
    };
    match request.send().await {
        Ok(resp) if resp.status().is_success() => (true, "reachable".into()),
        Ok(resp) if resp.status().as_u16() == 401 || resp.status().as_u16() == 403 => (
            false,
            format!(
                "{url} refused the API key ({}); check the key",
                resp.status()
            ),
        ),
        Ok(resp) => (
            true,
            format!("reachable, but {url} answered {}", resp.status()),
        ),
        Err(e) => (
            false,
            format!("cannot reach {url}: {e}; is the server running? set model.base_url"),
        ),
    }
}
