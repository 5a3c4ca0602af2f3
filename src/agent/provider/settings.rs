//! Which provider to use and how to reach it: [`ProviderSettings`] and [`build`].

use std::fmt;
use std::time::Duration;

/// Default base URL of the OpenAI API.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default OpenAI model.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4.1-mini";
/// Default base URL of the Anthropic API.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Default Anthropic model.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// Default output token cap when a request does not set one.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// What to tell a user who chose `openai` against api.openai.com without a key.
pub const OPENAI_NOT_CONFIGURED: &str = "set OPENAI_API_KEY, or model.base_url / OPENAI_BASE_URL \
     for a local OpenAI-compatible server such as Ollama (http://127.0.0.1:11434/v1)";
/// What to tell a user who chose `anthropic` against api.anthropic.com without a key.
pub const ANTHROPIC_NOT_CONFIGURED: &str = "set ANTHROPIC_API_KEY (or model.api_key), \
     or model.base_url / ANTHROPIC_BASE_URL for an Anthropic-compatible server";

pub use crate::config::ProviderKind;

impl ProviderKind {
    /// The base URL used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::OpenAi | ProviderKind::Responses => OPENAI_DEFAULT_BASE_URL,
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_BASE_URL,
            ProviderKind::Echo => "",
        }
    }

    /// The model used when none is configured.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::OpenAi | ProviderKind::Responses => OPENAI_DEFAULT_MODEL,
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_MODEL,
            ProviderKind::Echo => "echo",
        }
    }

    /// The environment variables for base URL and API key, if the kind has any.
    fn env_names(self) -> Option<(&'static str, &'static str)> {
        match self {
            ProviderKind::OpenAi | ProviderKind::Responses => {
                Some(("OPENAI_BASE_URL", "OPENAI_API_KEY"))
            }
            ProviderKind::Anthropic => Some(("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")),
            ProviderKind::Echo => None,
        }
    }
}

/// How to reach the model. `Debug` never prints the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// Wire format.
    pub kind: ProviderKind,
    /// Base URL; `None` means the kind's default.
    pub base_url: Option<String>,
    /// API key; `None` sends no auth header (fine for local servers).
    pub api_key: Option<String>,
    /// Model name; `None` means the kind's default.
    pub model: Option<String>,
    /// Longest wait for the next stream event (and for response headers).
    pub idle_timeout: Duration,
    /// Connection-level retries (connect errors, 429, 5xx) before giving up.
    pub max_retries: u32,
    /// Output token cap used when a request sets 0.
    pub max_tokens: u32,
    /// Extra HTTP headers sent with every call (`[providers.NAME] headers`).
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("max_tokens", &self.max_tokens)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for ProviderSettings {
    fn default() -> Self {
        ProviderSettings::new(ProviderKind::default())
    }
}

impl ProviderSettings {
    /// Settings of `kind` with every default: idle timeout 120 s, 3 retries, 8192 tokens.
    pub fn new(kind: ProviderKind) -> Self {
        ProviderSettings {
            kind,
            base_url: None,
            api_key: None,
            model: None,
            idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            max_tokens: DEFAULT_MAX_TOKENS,
            headers: Vec::new(),
        }
    }

    /// The provider `[model]` describes (`provider`, `base_url`, `api_key`, `model`), with
    /// the environment's fallbacks read through `env`.
    pub fn from_model(
        m: &crate::config::ModelConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let settings = ProviderSettings {
            base_url: non_empty(&m.base_url),
            api_key: non_empty(&m.api_key),
            model: non_empty(&m.model),
            ..ProviderSettings::new(m.provider).limits_of(m)
        };
        settings.resolve_env(env)
    }

    /// The provider `[providers.NAME]` entry `entry` describes with its key `key`, and
    /// `[model]`'s timeouts and limits; a provider named after its kind (`openai`,
    /// `anthropic`) reads the kind's environment variables for what it leaves empty.
    pub fn from_entry(
        name: &str,
        entry: &crate::config::ProviderEntry,
        key: Option<String>,
        m: &crate::config::ModelConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let non_empty = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
        let settings = ProviderSettings {
            base_url: non_empty(&entry.base_url),
            api_key: key,
            model: non_empty(&entry.model),
            headers: entry.headers.clone().into_iter().collect(),
            ..ProviderSettings::new(entry.kind).limits_of(m)
        };
        if name == crate::config::providers::kind_name(entry.kind) {
            settings.resolve_env(env)
        } else {
            settings.resolve_env(|_| None)
        }
    }

    /// These settings with `[model]`'s idle timeout, retries and token cap.
    fn limits_of(mut self, m: &crate::config::ModelConfig) -> Self {
        self.idle_timeout = Duration::from_secs(m.idle_timeout_s);
        self.max_retries = m.max_retries;
        self.max_tokens = m.max_tokens;
        self
    }

    /// Fills `base_url` and `api_key`, when unset or empty, from `OPENAI_BASE_URL` /
    /// `OPENAI_API_KEY` or `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY` as read through `env`.
    /// Empty values end up as `None`.
    pub fn resolve_env(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        let fill = |current: Option<String>, name: &str| -> Option<String> {
            non_empty(current).or_else(|| non_empty(env(name)))
        };
        if let Some((base_var, key_var)) = self.kind.env_names() {
            self.base_url = fill(self.base_url.take(), base_var);
            self.api_key = fill(self.api_key.take(), key_var);
        } else {
            self.base_url = non_empty(self.base_url.take());
            self.api_key = non_empty(self.api_key.take());
        }
        self.model = non_empty(self.model.take());
        self
    }

    /// The base URL to use, without a trailing slash.
    pub fn effective_base_url(&self) -> String {
        let base = match self.base_url.as_deref().map(str::trim) {
            Some(b) if !b.is_empty() => b,
            _ => self.kind.default_base_url(),
        };
        base.trim_end_matches('/').to_string()
    }

    /// The model to ask for.
    pub fn effective_model(&self) -> String {
        match self.model.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => self.kind.default_model().to_string(),
        }
    }

    /// The API key, if a non-empty one is set.
    pub fn effective_api_key(&self) -> Option<&str> {
        self.api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
    }

    /// The extra headers as a header map, on top of `headers` (fails on a header HTTP does
    /// not allow, naming it).
    pub fn add_headers(
        &self,
        headers: &mut reqwest::header::HeaderMap,
    ) -> Result<(), super::ProviderError> {
        use reqwest::header::{HeaderName, HeaderValue};
        for (name, value) in &self.headers {
            let bad = || {
                super::ProviderError::NotConfigured(format!("the header {name} is not valid HTTP"))
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let mut value = HeaderValue::from_str(value).map_err(|_| bad())?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(())
    }

    /// True when the base URL is the vendor's own API (which always needs a key).
    pub fn is_official_endpoint(&self) -> bool {
        let host = match self.kind {
            ProviderKind::OpenAi | ProviderKind::Responses => "api.openai.com",
            ProviderKind::Anthropic => "api.anthropic.com",
            ProviderKind::Echo => return false,
        };
        host_of(&self.effective_base_url()).eq_ignore_ascii_case(host)
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// The host part of a URL (no scheme, credentials, port or path), best effort.
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port.find(']').map_or(host_port, |i| &host_port[..=i]);
    }
    host_port.split(':').next().unwrap_or(host_port)
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::env_of;
    use super::*;

    #[test]
    fn env_fills_unset_or_empty_fields_only() {
        let env = env_of(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("OPENAI_API_KEY", "sk-env"),
        ]);
        let mut s = ProviderSettings::new(ProviderKind::OpenAi);
        s.api_key = Some(String::new());
        let s = s.resolve_env(&env);
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert_eq!(s.api_key.as_deref(), Some("sk-env"));

        let mut s = ProviderSettings::new(ProviderKind::OpenAi);
        s.api_key = Some("sk-file".into());
        let s = s.resolve_env(&env);
        assert_eq!(s.api_key.as_deref(), Some("sk-file"));

        let s = ProviderSettings::new(ProviderKind::Anthropic).resolve_env(&env);
        assert_eq!(s.base_url, None);
        assert_eq!(s.api_key, None);
        assert_eq!(s.effective_base_url(), ANTHROPIC_DEFAULT_BASE_URL);
        assert_eq!(s.effective_model(), ANTHROPIC_DEFAULT_MODEL);
    }

    #[test]
    fn debug_redacts_the_key() {
        let mut s = ProviderSettings::new(ProviderKind::OpenAi);
        s.api_key = Some("sk-secret".into());
        let printed = format!("{s:?}");
        assert!(!printed.contains("sk-secret"));
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn host_of_strips_scheme_port_and_path() {
        assert_eq!(host_of("https://api.openai.com/v1"), "api.openai.com");
        assert_eq!(host_of("http://user:pw@localhost:8080/x"), "localhost");
        assert_eq!(host_of("http://[::1]:11434/v1"), "[::1]");
    }
}
