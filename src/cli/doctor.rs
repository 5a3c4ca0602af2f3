//! `chela doctor`: checks config, store, model provider, channels and coding agents, and says
//! what to fix.

mod acp;
mod remote;

use std::process::ExitCode;

use chela::acp::harness::Installed;
use chela::config::{LoadedConfig, ProviderKind};
use chela::store::{Store, StoreError};

/// The lines printed so far and whether every check passed.
struct Report {
    ok: bool,
}

impl Report {
    /// Prints one check: `ok` or `FAIL`, what was checked, what was found.
    fn line(&mut self, good: bool, what: &str, detail: String) {
        self.ok &= good;
        println!("{} {what}: {detail}", if good { "ok  " } else { "FAIL" });
    }

    /// Prints something worth knowing that does not fail the check.
    fn warn(&self, what: &str, detail: String) {
        println!("warn {what}: {detail}");
    }
}

/// Runs every check; exits 1 when one fails.
pub async fn doctor(loaded: LoadedConfig) -> ExitCode {
    let mut report = Report { ok: true };
    report.line(
        true,
        "config",
        match &loaded.source {
            Some(path) => format!("{} parsed", path.display()),
            None => "no config file; embedded defaults (see config.example.toml)".into(),
        },
    );
    store(&loaded, &mut report).await;
    model(&loaded, &mut report).await;
    sandboxes(&loaded, &mut report);
    channels(&loaded, &mut report).await;
    coding_agents(&loaded, &mut report).await;
    mcp_servers(&loaded, &mut report).await;
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The engine `config` opens, by name (`?` when the folder and the setting disagree).
fn engine_name(config: &chela::config::StoreConfig) -> &'static str {
    chela::store::resolve_engine(config).map_or("?", |e| e.name())
}

/// The store opens (or the gateway holding it answers).
async fn store(loaded: &LoadedConfig, report: &mut Report) {
    let path = &loaded.config.store.path;
    match Store::open_config(&loaded.config) {
        Ok(store) => report.line(
            true,
            "store",
            format!(
                "{} ({}, {} sessions)",
                loaded.config.store.describe(),
                store.engine(),
                store.list_sessions().map(|s| s.len()).unwrap_or(0)
            ),
        ),
        Err(StoreError::Locked { .. }) => {
            // A running gateway holds it: the store is fine if that gateway answers.
            let reached = async {
                let mut client = super::rpc::connect(loaded).await?;
                client.call("status", serde_json::json!({})).await
            }
            .await;
            match reached {
                Ok(_) => report.line(
                    true,
                    "store",
                    format!(
                        "{} ({}, in use by the running gateway, which answers)",
                        path.display(),
                        engine_name(&loaded.config.store)
                    ),
                ),
                Err(e) => report.line(
                    false,
                    "store",
                    format!(
                        "{} is in use by another chela process that does not answer: {e}",
                        path.display()
                    ),
                ),
            }
        }
        Err(e) if loaded.config.store.is_postgres() || matches!(e, StoreError::NotBuilt { .. }) => {
            report.line(false, "store", e.to_string())
        }
        Err(e) => report.line(
            false,
            "store",
            format!("{e}; stop the other chela process or set store.path"),
        ),
    }
}

/// The providers are configured, and each model the default agent calls (its own, then its
/// fallbacks) is served by its provider's server.
async fn model(loaded: &LoadedConfig, report: &mut Report) {
    let targets = match chela::agent::model_targets(&loaded.config) {
        Ok(targets) => targets,
        Err(e) => return report.line(false, "model", e.to_string()),
    };
    for (i, (target, settings)) in targets.iter().enumerate() {
        let what = if i == 0 { "model" } else { "fallback" };
        if settings.kind == ProviderKind::Echo {
            report.line(
                true,
                what,
                format!("{target} (echo answers with your own text: a wiring check, not a model)"),
            );
            continue;
        }
        let base = settings.effective_base_url();
        let (good, detail) = remote::model_served(
            settings.kind,
            &base,
            settings.effective_api_key(),
            &target.model,
        )
        .await;
        let shown = chela::config::redact::redact_url(&base, false);
        report.line(good, what, format!("{target} at {shown}: {detail}"));
    }
}

/// The exec, ACP and hooks sandboxes.
fn sandboxes(loaded: &LoadedConfig, report: &mut Report) {
    let sandbox = chela::sandbox::ExecSandbox::from_config(&loaded.config);
    match sandbox.describe() {
        (true, detail) => report.line(true, "exec sandbox", detail),
        (false, detail) if sandbox.refuses() => report.line(false, "exec sandbox", detail),
        // exec still works: each command after the owner's approval, or with the network
        // confined only in part.
        (false, detail) => report.warn("exec sandbox", detail),
    }
    let config = &loaded.config;
    let acp_tcp = config.acp.network.connect_ports(&config.acp.allow_ports);
    let hooks_tcp = config
        .hooks
        .network
        .connect_ports(&config.hooks.allow_ports);
    let mcp_tcp = config.mcp.network.connect_ports(&config.mcp.allow_ports);
    let mcp = (!config.mcp.servers.is_empty()).then_some((
        "mcp sandbox",
        "[mcp] sandbox",
        config.mcp.sandbox,
        mcp_tcp,
    ));
    for (name, key, mode, tcp) in [
        ("acp sandbox", "[acp] sandbox", config.acp.sandbox, acp_tcp),
        (
            "hooks sandbox",
            "[hooks] sandbox",
            config.hooks.sandbox,
            hooks_tcp,
        ),
    ]
    .into_iter()
    .chain(mcp)
    {
        match chela::sandbox::ChildSandbox::from_config(mode, tcp, config).describe(key) {
            (true, detail) => report.line(true, name, detail),
            // They still run, unconfined: a warning, not a failure.
            (false, detail) => report.warn(name, detail),
        }
    }
}

/// Each chat platform ([`crate::cli::platforms::PLATFORMS`]) whose token is set is asked who
/// the bot is.
async fn channels(loaded: &LoadedConfig, report: &mut Report) {
    for platform in crate::cli::platforms::PLATFORMS {
        if (platform.configured)(&loaded.config) {
            let (good, detail) = (platform.check)(&loaded.config).await;
            report.line(good, platform.name, detail);
        } else {
            let why = format!(
                "no token (set {} to run the {} channel)",
                platform.token_env, platform.title
            );
            report.line(true, platform.name, why);
        }
    }
}

/// How long `chela doctor` waits for one MCP server to start and list its tools.
const MCP_START: std::time::Duration = std::time::Duration::from_secs(30);

/// Every enabled MCP server (`[mcp.servers]`) is started (or reached) as the gateway would,
/// and its tools listed; a disabled one is named.
async fn mcp_servers(loaded: &LoadedConfig, report: &mut Report) {
    for (name, server) in &loaded.config.mcp.servers {
        let what = format!("mcp {name}");
        if !server.enabled {
            report.line(true, &what, "disabled (enabled = false)".into());
            continue;
        }
        match chela::mcp::probe(&loaded.config, name, MCP_START).await {
            Ok(tools) => {
                let names: Vec<&str> = tools.iter().map(|t| t.exposed.as_str()).collect();
                let detail = format!("{} tools: {}", names.len(), names.join(", "));
                report.line(true, &what, detail);
            }
            Err(why) => report.line(false, &what, why),
        }
    }
}

/// Every coding agent: a configured one (`[acp.agents.NAME]`) must start and answer; a
/// built-in one found on PATH is started too, its failure a warning; one run through npx is
/// not started (that would fetch its package).
async fn coding_agents(loaded: &LoadedConfig, report: &mut Report) {
    let acp_config = &loaded.config.acp;
    let path = std::env::var("PATH").ok();
    for (name, harness) in acp_config.harnesses() {
        let what = format!("acp {name}");
        let required = acp_config.agents.contains_key(&name);
        let installed = chela::acp::harness::installed(&harness, path.as_deref());
        let start = match &installed {
            Installed::Missing(_) => false,
            Installed::ViaNpx(_) => required,
            Installed::Found(_) => true,
        };
        if !start {
            // Not there, or a built-in through npx: only required ones fail.
            report.line(
                installed.is_usable() || !required,
                &what,
                installed.to_string(),
            );
            continue;
        }
        match acp::starts(&harness, &loaded.config, acp::START_TIMEOUT).await {
            (true, detail) => report.line(true, &what, detail),
            (false, detail) if required => report.line(false, &what, detail),
            (false, detail) => report.warn(
                &what,
                format!("{detail}\n       (built in, not configured: not a failure)"),
            ),
        }
    }
}
