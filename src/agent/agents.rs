//! The agents behind one gateway: the default one (`[agent]`) and one per `[[agents]]`
//! entry. A session's agent is named by its key (`agent:<id>:...`).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::provider::route::catalog::Catalog;
use super::provider::{Provider, ProviderError};
use super::run::Agent;
use super::{AgentPorts, build, router};
use crate::config::Config;
use crate::store::Store;

/// The default agent's model backend, and each `[[agents]]` entry's in order.
pub type AgentProviders = (Arc<dyn Provider>, Vec<Arc<dyn Provider>>);

/// Every agent of a gateway.
pub struct Agents {
    default: Agent,
    others: Vec<Agent>,
}

impl Agents {
    /// The model backends of `config`'s agents: the default agent's, and each `[[agents]]`
    /// entry's in order, over one catalog of providers (so a key or model that failed rests
    /// for all); fails on one it cannot set up.
    pub fn providers(config: &Config) -> Result<AgentProviders, ProviderError> {
        let env = |name: &str| std::env::var(name).ok();
        let catalog = Arc::new(Catalog::from_config(config, &env)?);
        let default = router(config, &catalog, Catalog::main_name(config))?;
        // An agent's bare model names are models of the default agent's provider.
        let main = default.name().to_owned();
        let others = config
            .agents
            .iter()
            .filter_map(|entry| config.for_agent(&entry.id))
            .map(|own| router(&own, &catalog, &main))
            .collect::<Result<_, _>>()?;
        Ok((default, others))
    }

    /// Builds the default agent of `config` on `provider` and each `[[agents]]` entry on
    /// its own of `providers` ([`Agents::providers`]); `ports` makes the gateway-side ports
    /// of each.
    pub fn build(
        config: &Config,
        store: &Store,
        shutdown: &CancellationToken,
        provider: Arc<dyn Provider>,
        providers: Vec<Arc<dyn Provider>>,
        ports: &dyn Fn() -> AgentPorts,
    ) -> Agents {
        let default = build(config, store.clone(), shutdown.clone(), provider, ports());
        let others = config
            .agents
            .iter()
            .filter_map(|entry| config.for_agent(&entry.id))
            .zip(providers)
            .map(|(own, provider)| build(&own, store.clone(), shutdown.clone(), provider, ports()))
            .collect();
        Agents { default, others }
    }

    /// Only `agent`, as the default.
    pub fn one(agent: Agent) -> Agents {
        Agents {
            default: agent,
            others: Vec::new(),
        }
    }

    /// The default agent (`[agent]`).
    pub fn default_agent(&self) -> &Agent {
        &self.default
    }

    /// The agent with id `id`, if there is one.
    pub fn by_id(&self, id: &str) -> Option<&Agent> {
        std::iter::once(&self.default)
            .chain(&self.others)
            .find(|a| a.id == id)
    }

    /// The agent of session `key` (its `agent:<id>:` part); the default agent for a key of
    /// an agent no longer configured, or one that does not parse.
    pub fn for_key(&self, key: &str) -> &Agent {
        crate::domain::session_key::SessionKey::parse(key)
            .ok()
            .and_then(|k| self.by_id(&k.agent))
            .unwrap_or(&self.default)
    }
}
