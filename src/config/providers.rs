//! `[providers.NAME]`: model providers by name (docs/models.md). A model is then named
//! `NAME/model`; `[model] model` and `fallbacks` (and an `[[agents]]` entry's) pick from them.
//! Without any entry, `[model]`'s `provider`, `base_url` and `api_key` describe the one
//! provider, named after its kind (`openai`, `anthropic`), exactly as before.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ProviderKind;

/// One `[providers.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// Wire format: `openai` (chat completions), `responses` (the OpenAI Responses API),
    /// `anthropic` (Messages), `echo`.
    pub kind: ProviderKind,
    /// API base URL; empty: the kind's (`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` only for a
    /// provider named `openai` / `anthropic`).
    #[serde(default)]
    pub base_url: String,
    /// One API key (`${ENV}` works); empty: none, or the kind's variable for a provider
    /// named after its kind.
    #[serde(default)]
    pub api_key: String,
    /// Several API keys, used in turn: a key answered 429 or 401 rests and the next one is
    /// used (after `api_key` when both are set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<String>,
    /// Extra HTTP headers sent with every call (e.g. `HTTP-Referer` for OpenRouter).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The model used when a name gives only the provider; empty: the kind's default.
    #[serde(default)]
    pub model: String,
}

impl ProviderEntry {
    /// Every key of the entry, in the order they are used (empty ones left out).
    pub fn keys(&self) -> Vec<String> {
        std::iter::once(&self.api_key)
            .chain(&self.api_keys)
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .collect()
    }
}

/// Longest provider name.
const MAX_NAME: usize = 32;

/// Whether `name` may name a provider: `[a-z0-9][a-z0-9_-]{0,31}` (so `NAME/model` splits
/// at its first `/`).
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= MAX_NAME
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Checks `[providers]` and the model names of `[model]` and `[[agents]]`: `Err((key,
/// message))` names the key at fault.
pub fn check(config: &super::Config) -> Result<(), (String, String)> {
    for (name, entry) in &config.providers {
        let at = |field: &str| format!("providers.{name}.{field}");
        if !is_valid_name(name) {
            return Err((
                format!("providers.{name}"),
                format!(
                    "{name:?} is not a valid provider name; expected [a-z0-9][a-z0-9_-]{{0,31}}"
                ),
            ));
        }
        if !entry.base_url.trim().is_empty() {
            super::urls::check(&entry.base_url, &["http", "https"])
                .map_err(|message| (at("base_url"), message))?;
        }
        for (header, value) in &entry.headers {
            let auth = ["authorization", "x-api-key"];
            if auth.iter().any(|a| header.eq_ignore_ascii_case(a)) {
                return Err((
                    at(&format!("headers.{header}")),
                    "carries the key: set it with api_key or api_keys (rotated on 429 and 401)"
                        .to_owned(),
                ));
            }
            let bad_name = reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err();
            let bad_value = reqwest::header::HeaderValue::from_str(value).is_err();
            if bad_name || bad_value {
                return Err((
                    at(&format!("headers.{header}")),
                    "is not a valid HTTP header".to_owned(),
                ));
            }
        }
    }
    let model = &config.model;
    let named_by_kind = config.providers.contains_key(kind_name(model.provider));
    if named_by_kind && !(model.base_url.is_empty() && model.api_key.is_empty()) {
        let key = if model.base_url.is_empty() {
            "model.api_key"
        } else {
            "model.base_url"
        };
        return Err((
            key.to_owned(),
            format!(
                "[providers.{}] describes this provider; set base_url and api_key there",
                kind_name(model.provider)
            ),
        ));
    }
    check_names("model.fallbacks", &model.fallbacks)?;
    check_names("model.models", &model.models)?;
    for (i, agent) in config.agents.iter().enumerate() {
        if let Some(fallbacks) = &agent.fallbacks {
            check_names(&format!("agents[{i}].fallbacks"), fallbacks)?;
        }
    }
    Ok(())
}

/// The name the `[model]` provider of `kind` goes by.
pub fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Responses => "responses",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Echo => "echo",
    }
}

fn check_names(key: &str, names: &[String]) -> Result<(), (String, String)> {
    for name in names {
        if name.trim().is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err((
                key.to_owned(),
                format!(
                    "{name:?} is not a model name; write provider/model, e.g. \"anthropic/claude-sonnet-4-5\""
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_words() {
        assert!(is_valid_name("openrouter"));
        assert!(is_valid_name("local-2"));
        assert!(!is_valid_name("Open"));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name(&"a".repeat(33)));
    }

    #[test]
    fn keys_come_in_order_without_empty_ones() {
        let entry = ProviderEntry {
            api_key: "k1".into(),
            api_keys: vec![" ".into(), "k2".into()],
            ..ProviderEntry::default()
        };
        assert_eq!(entry.keys(), ["k1", "k2"]);
    }
}
