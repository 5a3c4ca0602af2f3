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

/// The provider settings `config` asks for, with environment fallbacks applied.
pub fn provider_settings(config: &Config) -> ProviderSettings {
    let m = &config.model;
    let kind = m.provider;
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let settings = ProviderSettings {
        kind,
        base_url: non_empty(&m.base_url),
        api_key: non_empty(&m.api_key),
        model: non_empty(&m.model),
        idle_timeout: Duration::from_secs(m.idle_timeout_s),
        max_retries: m.max_retries,
        max_tokens: m.max_tokens,
    };
    settings.resolve_env(|name| std::env::var(name).ok())
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
}

/// The model backend `config` names (fails on a provider it cannot set up).
pub fn provider(config: &Config) -> Result<std::sync::Arc<dyn provider::Provider>, ProviderError> {
    provider::build(&provider_settings(config))
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
    let pricing = std::sync::Arc::new(pricing::Pricing::with_named(
        config.pricing.clone(),
        std::iter::once(provider.model().to_owned())
            .chain(config.model.models.iter().cloned())
            .collect(),
    ));
    Agent {
        skill_names,
        provider,
        tools,
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
