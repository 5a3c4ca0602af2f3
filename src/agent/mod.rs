//! The agent run: context, model streaming, tools, events.

mod agents;
pub mod approval;
pub mod compact;
pub mod compaction;
pub mod context;
pub mod hooks;
pub mod media;
pub mod memory;
pub mod memory_flush;
pub mod model_choice;
pub mod policy;
pub mod pricing;
pub mod provider;
pub mod run;
pub mod skills;
pub mod steer;
#[cfg(test)]
pub(crate) mod test_support;
pub mod tool_specs;
pub mod tools;
pub mod usage;

use std::time::Duration;

use crate::agent::provider::ProviderError;
use crate::agent::provider::settings::ProviderSettings;
use crate::agent::run::Agent;
use crate::agent::tools::ToolContext;
use crate::config::Config;
use crate::store::Store;

pub use agents::Agents;

/// The provider settings `config`'s `[model]` asks for, with environment fallbacks applied.
pub fn provider_settings(config: &Config) -> ProviderSettings {
    ProviderSettings::from_model(&config.model, |name| std::env::var(name).ok())
}

/// The exec sandbox `config` asks for, with a log line saying what it is.
fn exec_sandbox(config: &Config) -> crate::sandbox::ExecSandbox {
    let sandbox = crate::sandbox::ExecSandbox::from_config(config);
    match sandbox.describe() {
        (true, line) => tracing::info!("exec sandbox: {line}"),
        (false, line) => tracing::warn!("exec sandbox: {line}"),
    }
    sandbox
}

/// What the gateway lends the agent's tools: sub-agent spawning, messages and the session
/// tools, and exec approvals asked in the chat. Each is `None` outside a gateway (the tool then
/// refuses, or nobody can be asked).
#[derive(Default)]
pub struct AgentPorts {
    /// `sessions_spawn`'s work.
    pub spawner: tools::spawn::SpawnerPort,
    /// `message`, `sessions_list` and `sessions_history`.
    pub sessions: tools::sessions::SessionsPort,
    /// Exec approvals.
    pub approver: approval::ApproverPort,
    /// `cron`'s jobs.
    pub cron: tools::cron::CronPort,
    /// The gateway's MCP servers (`None`: none configured).
    pub mcp: Option<std::sync::Arc<crate::mcp::Hub>>,
    /// The gateway's one `browser` tool, shared by every agent (`None`: off or not built).
    pub browser: Option<std::sync::Arc<dyn tools::Tool>>,
}

/// The models the default agent of `config` calls, its own first and then its fallbacks,
/// each with the settings of its provider (first key), environment included: what `chela
/// doctor` checks and `chela config show` prints. Fails as the gateway's start would.
pub fn model_targets(
    config: &Config,
) -> Result<Vec<(provider::route::Target, ProviderSettings)>, ProviderError> {
    let env = |name: &str| std::env::var(name).ok();
    let catalog = provider::route::catalog::Catalog::from_config(config, &env)?;
    let main = provider::route::catalog::Catalog::main_name(config);
    let router = model_router(config, std::sync::Arc::new(catalog), main)?;
    let targets = router.targets().into_iter().filter_map(|target| {
        let settings = provider::route::catalog::settings_of(config, &target.provider, &env)?;
        Some((target, settings))
    });
    Ok(targets.collect())
}

/// The model backend of agent `config` (`Config::for_agent`'s view) over `catalog`, its
/// bare model names being models of provider `main`.
pub(crate) fn router(
    config: &Config,
    catalog: &std::sync::Arc<provider::route::catalog::Catalog>,
    main: &str,
) -> Result<std::sync::Arc<dyn provider::Provider>, ProviderError> {
    Ok(std::sync::Arc::new(model_router(
        config,
        catalog.clone(),
        main,
    )?))
}

/// The model router of agent `config` over `catalog`, bare names models of `main`.
fn model_router(
    config: &Config,
    catalog: std::sync::Arc<provider::route::catalog::Catalog>,
    main: &str,
) -> Result<provider::route::ModelRouter, ProviderError> {
    provider::route::ModelRouter::new(
        catalog,
        main,
        &config.model.model,
        &config.model.fallbacks,
        config.model.max_retries,
    )
}

/// Builds the agent from config: provider, tools, system prompt, and the gateway's `ports`.
/// `shutdown` is the gateway's.
pub fn build(
    config: &Config,
    store: Store,
    shutdown: tokio_util::sync::CancellationToken,
    provider: std::sync::Arc<dyn provider::Provider>,
    ports: AgentPorts,
) -> Agent {
    let workspace = config.agent.workspace.clone();
    if let Err(e) = std::fs::create_dir_all(&workspace) {
        tracing::warn!(error = %e, path = %workspace.display(), "cannot create the workspace");
    }
    let mut tools = tools::builtin_tools();
    tools.push(std::sync::Arc::new(tools::spawn::SessionsSpawnTool {
        spawner: ports.spawner,
    }));
    tools.extend(tools::sessions::tools(&ports.sessions));
    tools.push(std::sync::Arc::new(tools::cron::CronTool {
        api: ports.cron,
    }));
    tools.extend(tools::web::tools(&config.tools.web));
    tools.extend(ports.browser);
    tools.extend(tools::memory::tools());
    let skills = skills::load(config);
    let system_prompt = context::system_prompt(&context::PromptParts {
        identity: &config.agent.identity,
        skills: &skills,
        workspace: &workspace,
        caps: context::BootstrapCaps {
            per_file: config.agent.bootstrap_max_chars,
            total: config.agent.bootstrap_total_max_chars,
        },
        model: &format!("{}/{}", provider.name(), provider.model()),
    });
    let skill_names = skills.iter().map(|s| s.name.clone()).collect();
    let named = std::iter::once(provider.model().to_owned()).chain(
        (config.model.models.iter())
            .chain(&config.model.fallbacks)
            .map(|name| provider.resolve(name).1),
    );
    let pricing = std::sync::Arc::new(pricing::Pricing::with_named(
        config.pricing.clone(),
        named.collect(),
    ));
    Agent {
        skill_names,
        provider,
        tools,
        specs: Default::default(),
        mcp: ports.mcp.map(|hub| tools::mcp::McpTools {
            hub,
            selection: config.agent.mcp.clone(),
        }),
        system_prompt,
        policy: policy::ToolPolicy::new(&config.tools),
        approver: ports.approver,
        id: config.agent.id.clone(),
        store,
        tool_context: ToolContext {
            workspace,
            cancel: Default::default(),
            exec_timeout: Duration::from_secs(config.tools.exec_timeout_s),
            max_output_chars: config.tools.max_output_chars,
            session_key: String::new(),
            run_id: String::new(),
            exec: std::sync::Arc::new(exec_sandbox(config)),
            reply_to: None,
            events: None,
        },
        run_timeout: Duration::from_secs(config.agent.timeout_s),
        max_tokens: config.model.max_tokens,
        pricing,
        thinking: config.model.thinking,
        prompt_cache: config.model.prompt_cache,
        vision: config.model.vision,
        shutdown,
        compaction: compact::CompactionSettings {
            context_window: config.model.context_window,
            reserve_tokens: config.agent.compaction_reserve_tokens,
        },
        memory: memory::MemorySettings::new(&config.memory),
        hooks: hooks::Hooks::new(config.hooks.clone(), config.agent.workspace.clone()).confined_by(
            crate::sandbox::ChildSandbox::announced(
                config.hooks.sandbox,
                config
                    .hooks
                    .network
                    .connect_ports(&config.hooks.allow_ports),
                config,
                "[hooks] sandbox",
            ),
        ),
    }
}
