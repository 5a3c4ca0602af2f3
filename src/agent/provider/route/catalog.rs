//! The providers a gateway can call, by name: each `[providers.NAME]` entry, and the
//! provider `[model]` describes (named after its kind) with the other well-known kinds when
//! their environment sets them up. Each named provider holds one built provider per key.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::time::Instant;

use super::super::settings::ProviderSettings;
use super::super::{Provider, ProviderError, build};
use super::health::{Health, Subject};
use crate::config::providers::kind_name;
use crate::config::{Config, ProviderKind};

/// One provider by name, with one built provider per key.
pub struct Named {
    /// Its name (`[providers.NAME]`, or the kind's for `[model]`'s).
    pub name: String,
    /// The model a name giving only this provider means.
    pub default_model: String,
    /// One built provider per key, in the order of the keys (one without a key when none).
    slots: Vec<Arc<dyn Provider>>,
    /// The key calls start with: it moves on when one is rate limited or refused.
    current: AtomicUsize,
    /// Whether its model names may start with a vendor's name: an OpenAI-compatible server
    /// of one's own (OpenRouter's `anthropic/claude-3.5-sonnet`, vLLM's `meta-llama/...`).
    vendor_names: bool,
}

impl Named {
    /// A provider named `name` over `slots` (at least one).
    pub fn new(name: &str, slots: Vec<Arc<dyn Provider>>) -> Option<Named> {
        let default_model = slots.first()?.model().to_owned();
        Some(Named {
            name: name.to_owned(),
            default_model,
            slots,
            current: AtomicUsize::new(0),
            vendor_names: false,
        })
    }

    /// This provider, serving model names that start with a vendor's name when `settings`
    /// are those of an OpenAI-compatible server other than OpenAI's own.
    fn serving(mut self, settings: &ProviderSettings) -> Named {
        self.vendor_names =
            settings.kind == ProviderKind::OpenAi && !settings.is_official_endpoint();
        self
    }

    /// The key to use at `now`: the current one or the next after it that does not rest
    /// and was not `tried` by this call; else the current one.
    pub fn pick(
        &self,
        health: &Health,
        now: Instant,
        tried: &[bool],
    ) -> (usize, &Arc<dyn Provider>) {
        let count = self.slots.len();
        let start = self.current.load(Ordering::Relaxed) % count;
        let ready = (0..count)
            .map(|step| (start + step) % count)
            .find(|&i| self.usable(i, health, now, tried));
        let index = ready.unwrap_or(start);
        if index != start {
            self.current.store(index, Ordering::Relaxed);
        }
        (index, &self.slots[index])
    }

    /// Whether some key does not rest at `now`.
    pub fn has_ready_key(&self, health: &Health, now: Instant) -> bool {
        (0..self.slots.len()).any(|i| health.resting(&self.key(i), now).is_none())
    }

    /// Whether some key neither rests at `now` nor was `tried` by this call.
    pub fn has_untried_key(&self, health: &Health, now: Instant, tried: &[bool]) -> bool {
        (0..self.slots.len()).any(|i| self.usable(i, health, now, tried))
    }

    fn usable(&self, index: usize, health: &Health, now: Instant, tried: &[bool]) -> bool {
        !tried.get(index).copied().unwrap_or(false)
            && health.resting(&self.key(index), now).is_none()
    }

    /// Every key, as what rests.
    pub fn keys(&self) -> Vec<Subject> {
        (0..self.slots.len()).map(|i| self.key(i)).collect()
    }

    /// How many keys it has (1 for a provider without a key).
    pub fn key_count(&self) -> usize {
        self.slots.len()
    }

    /// Key number `index`, as what rests.
    pub fn key(&self, index: usize) -> Subject {
        Subject::Key {
            provider: self.name.clone(),
            index,
        }
    }

    /// The first key's provider (for the server's model list).
    pub fn first(&self) -> &Arc<dyn Provider> {
        &self.slots[0]
    }
}

/// Every provider of a gateway, and the rests of their keys and models.
pub struct Catalog {
    providers: Vec<Named>,
    /// Providers that could not be set up, with why: an error only once a model names them.
    unbuilt: HashMap<String, String>,
    /// The names of the `[providers.NAME]` entries.
    explicit: std::collections::HashSet<String>,
    /// The rests, shared by every agent.
    pub health: Health,
}

impl Catalog {
    /// The catalog `config` describes. A `[providers.NAME]` entry that cannot be set up is
    /// an error (naming it); so is the `[model]` provider when a model of it is named.
    pub fn from_config(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Catalog, ProviderError> {
        let mut catalog = Catalog {
            providers: Vec::new(),
            unbuilt: HashMap::new(),
            explicit: config.providers.keys().cloned().collect(),
            health: Health::default(),
        };
        for (name, entry) in &config.providers {
            let keys = entry.keys();
            let keys: Vec<Option<String>> = match keys.is_empty() {
                true => vec![None],
                false => keys.into_iter().map(Some).collect(),
            };
            let mut slots = Vec::with_capacity(keys.len());
            let first = ProviderSettings::from_entry(name, entry, None, &config.model, env);
            for key in keys {
                let settings = ProviderSettings::from_entry(name, entry, key, &config.model, env);
                let provider = build(&no_retries(settings)).map_err(|e| {
                    ProviderError::NotConfigured(format!("[providers.{name}]: {e}"))
                })?;
                slots.push(provider);
            }
            let named = Named::new(name, slots).map(|n| n.serving(&first));
            catalog.providers.extend(named);
        }
        let main = config.model.provider;
        for kind in [main, ProviderKind::OpenAi, ProviderKind::Anthropic] {
            let name = kind_name(kind);
            if catalog.get(name).is_some() || catalog.unbuilt.contains_key(name) {
                continue;
            }
            let settings = implicit_settings(config, kind, env);
            match build(&no_retries(settings.clone())) {
                Ok(provider) => {
                    let named = Named::new(name, vec![provider]).map(|n| n.serving(&settings));
                    catalog.providers.extend(named);
                }
                Err(e) => {
                    catalog.unbuilt.insert(name.to_owned(), e.to_string());
                }
            }
        }
        Ok(catalog)
    }

    /// A catalog of `providers` only (for tests).
    #[cfg(test)]
    pub(crate) fn of(providers: Vec<Named>) -> Catalog {
        let explicit = providers.iter().map(|p| p.name.clone()).collect();
        Catalog {
            providers,
            unbuilt: HashMap::new(),
            explicit,
            health: Health::default(),
        }
    }

    /// The provider named `name`.
    pub fn get(&self, name: &str) -> Option<&Named> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Why provider `name` could not be set up, if it could not.
    pub fn unbuilt(&self, name: &str) -> Option<&str> {
        self.unbuilt.get(name).map(String::as_str)
    }

    /// Whether `name` names a provider in a model name read against provider `default`
    /// (`name/model`): a `[providers.NAME]` entry's always; one chela adds itself (`openai`,
    /// `anthropic`, set up or not, so a fallback to one that is not names why) unless
    /// `default` is an OpenAI-compatible server of one's own, whose model names often start
    /// with a vendor's (OpenRouter's `anthropic/claude-3.5-sonnet`, Groq's
    /// `openai/gpt-oss-120b`).
    pub fn knows(&self, name: &str, default: &str) -> bool {
        if self.explicit.contains(name) {
            return true;
        }
        let vendor_names = self.get(default).is_some_and(|d| d.vendor_names);
        !vendor_names && (self.get(name).is_some() || self.unbuilt.contains_key(name))
    }

    /// The provider and model `name` names, bare names being models of `default`:
    /// `PROVIDER/MODEL` when [`Catalog::knows`] `PROVIDER`, else the whole name a model.
    pub fn resolve(&self, name: &str, default: &str) -> (String, String) {
        match name.split_once('/') {
            Some((provider, model)) if !model.is_empty() && self.knows(provider, default) => {
                (provider.to_owned(), model.to_owned())
            }
            _ => (default.to_owned(), name.to_owned()),
        }
    }

    /// The provider `[model]` describes, by name.
    pub fn main_name(config: &Config) -> &'static str {
        kind_name(config.model.provider)
    }
}

/// The settings of the provider named after `kind` that `config` does not describe in
/// `[providers]`: `[model]`'s for its kind, the environment's for the others.
fn implicit_settings(
    config: &Config,
    kind: ProviderKind,
    env: &dyn Fn(&str) -> Option<String>,
) -> ProviderSettings {
    if kind != config.model.provider {
        return ProviderSettings::new(kind).resolve_env(env);
    }
    let mut settings = ProviderSettings::from_model(&config.model, env);
    // `[model] model = "other/x"` names a model of another provider, not this one's default.
    let names_another = |model: &str| {
        model.split_once('/').is_some_and(|(provider, _)| {
            config.providers.contains_key(provider)
                || [
                    ProviderKind::OpenAi,
                    ProviderKind::Anthropic,
                    ProviderKind::Echo,
                ]
                .iter()
                .any(|k| kind_name(*k) == provider && *k != kind)
        })
    };
    if settings.model.as_deref().is_some_and(names_another) {
        settings.model = None;
    }
    settings
}

/// The settings of provider `name` of `config` with its first key, as the catalog builds it
/// (`None` for a name that is no provider).
pub fn settings_of(
    config: &Config,
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<ProviderSettings> {
    if let Some(entry) = config.providers.get(name) {
        let key = entry.keys().into_iter().next();
        return Some(ProviderSettings::from_entry(
            name,
            entry,
            key,
            &config.model,
            env,
        ));
    }
    [
        config.model.provider,
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
    ]
    .into_iter()
    .find(|kind| kind_name(*kind) == name)
    .map(|kind| implicit_settings(config, kind, env))
}

/// `settings` with no retries of their own: the router retries, rotates keys and falls back.
fn no_retries(mut settings: ProviderSettings) -> ProviderSettings {
    settings.max_retries = 0;
    settings
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn on_a_compatible_server_vendor_names_stay_model_names() {
        // OpenRouter as `[model]`: its `anthropic/...` and `openai/...` models are its own,
        // whether or not an Anthropic key is set.
        let config = config(
            "[model]\nprovider = \"openai\"\nbase_url = \"https://openrouter.ai/api/v1\"\nmodel = \"anthropic/claude-3.5-sonnet\"\n",
        );
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let catalog = Catalog::from_config(&config, &env).unwrap();
        assert!(catalog.get("anthropic").is_some());
        for name in ["anthropic/claude-3.5-sonnet", "openai/gpt-oss-120b"] {
            assert_eq!(
                catalog.resolve(name, "openai"),
                ("openai".into(), name.into())
            );
        }
        // A `[providers]` entry's name always splits.
        let config = config_with_router();
        let catalog = Catalog::from_config(&config, &|_| None).unwrap();
        assert_eq!(
            catalog.resolve("router/x", "openai"),
            ("router".into(), "x".into())
        );
    }

    fn config_with_router() -> Config {
        config(
            "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[providers.router]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
    }

    #[test]
    fn names_resolve_to_providers_or_stay_models() {
        let config = config(
            "[model]\nprovider = \"echo\"\n[providers.router]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        );
        let catalog = Catalog::from_config(&config, &|_| None).unwrap();
        assert!(catalog.get("router").is_some() && catalog.get("echo").is_some());
        assert_eq!(
            catalog.resolve("router/meta/llama-3", "echo"),
            ("router".into(), "meta/llama-3".into())
        );
        assert_eq!(
            catalog.resolve("meta/llama-3", "router"),
            ("router".into(), "meta/llama-3".into())
        );
        assert_eq!(
            catalog.resolve("gpt-5", "echo"),
            ("echo".into(), "gpt-5".into())
        );
        // No OpenAI key in this environment: known, not set up, and why.
        assert!(catalog.get("openai").is_none());
        assert!(
            catalog
                .unbuilt("openai")
                .unwrap()
                .contains("OPENAI_API_KEY")
        );
        assert_eq!(
            catalog.resolve("openai/gpt-5", "echo"),
            ("openai".into(), "gpt-5".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn keys_rotate_past_resting_ones() {
        let config = config(
            "[model]\nprovider = \"echo\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_keys = [\"a\", \"b\", \"c\"]\n",
        );
        let catalog = Catalog::from_config(&config, &|_| None).unwrap();
        let p = catalog.get("p").unwrap();
        let health = &catalog.health;
        let now = Instant::now();
        let none = [false; 3];
        assert_eq!(p.key_count(), 3);
        assert_eq!(p.pick(health, now, &none).0, 0);
        // A key this call tried is not handed back, even if its rest was cleared.
        assert_eq!(p.pick(health, now, &[true, false, false]).0, 1);
        let limited = ProviderError::Status {
            status: 429,
            message: String::new(),
            retry_after: Some(5),
        };
        let failure = super::super::failure::Failure::RateLimited;
        health.failed(p.key(0), failure, &limited, now);
        assert_eq!(p.pick(health, now, &none).0, 1);
        health.failed(p.key(1), failure, &limited, now);
        assert_eq!(p.pick(health, now, &none).0, 2);
        health.failed(p.key(2), failure, &limited, now);
        assert!(!p.has_ready_key(health, now));
        // Every key rests: the current one is used.
        assert_eq!(p.pick(health, now, &none).0, 2);
        // Once the rests are over, calls stay on the key they moved to.
        let later = now + std::time::Duration::from_secs(6);
        assert_eq!(p.pick(health, later, &none).0, 2);
    }
}
