//! `[tools.web]`: limits of `web_fetch`, the private-address rule, and `[tools.web.search]`
//! (the provider of `web_search`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ParseEnumError;
use super::urls::{HTTP, check};

/// The search service `web_search` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// None configured: `web_search` answers with an error saying what to set.
    #[default]
    None,
    /// Brave Search's API (`X-Subscription-Token`: `api_key` or env `BRAVE_API_KEY`).
    Brave,
    /// A SearXNG instance at `base_url` with the JSON format enabled.
    Searxng,
}

named_enum!(SearchProvider, "search provider", [
    None => "none", Brave => "brave", Searxng => "searxng",
]);

/// `[tools.web.search]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchConfig {
    /// `none` | `brave` | `searxng`.
    pub provider: SearchProvider,
    /// Brave's subscription token; empty: env `BRAVE_API_KEY`.
    pub api_key: String,
    /// SearXNG: the instance's address (required). Brave: empty for the public API, or
    /// another address speaking the same API.
    pub base_url: String,
    /// Results given when the call names no count (at most 20).
    pub count: u32,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self {
            provider: SearchProvider::None,
            api_key: String::new(),
            base_url: String::new(),
            count: 5,
        }
    }
}

/// `[tools.web]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Seconds one `web_fetch` or `web_search` call may take, redirects and body included.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub timeout_s: u64,
    /// Most bytes of a page `web_fetch` reads; the rest is cut (and the result says so).
    pub max_bytes: u64,
    /// Most chars of text `web_fetch` returns (a call may ask for fewer).
    pub max_chars: usize,
    /// Whether `web_fetch` may reach private, loopback, link-local and similar addresses.
    pub allow_private: bool,
    /// Hosts `web_fetch` may reach even on such addresses (`"intranet.lan"`, `"127.0.0.1"`,
    /// `"*.corp.example"` for every subdomain), on every port; an entry with a port is refused.
    pub allow_hosts: Vec<String>,
    /// The `User-Agent` of web requests.
    pub user_agent: String,
    /// `[tools.web.search]`: the provider of `web_search`.
    pub search: WebSearchConfig,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            timeout_s: 30,
            max_bytes: 2_000_000,
            max_chars: 20_000,
            allow_private: false,
            allow_hosts: Vec::new(),
            user_agent: "Mozilla/5.0 (compatible; chela)".to_owned(),
            search: WebSearchConfig::default(),
        }
    }
}

impl WebConfig {
    /// Checks limits, host names and the search provider's settings; the error names the key.
    pub fn check(&self) -> Result<(), (String, String)> {
        let positive = [
            ("tools.web.timeout_s", self.timeout_s),
            ("tools.web.max_bytes", self.max_bytes),
            ("tools.web.max_chars", self.max_chars as u64),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err((key.to_owned(), "must be at least 1".to_owned()));
            }
        }
        if let Some(bad) = self
            .allow_hosts
            .iter()
            .find(|h| h.trim().is_empty() || h.contains('/') || h.contains(char::is_whitespace))
        {
            return Err((
                "tools.web.allow_hosts".to_owned(),
                format!("{bad:?} is no host name (write \"example.lan\" or \"10.0.0.5\")"),
            ));
        }
        if let Some(bad) = self.allow_hosts.iter().find(|h| has_port(h)) {
            return Err((
                "tools.web.allow_hosts".to_owned(),
                format!(
                    "{bad:?} has a port; write the host alone (an entry opens every port of \
                     that host)"
                ),
            ));
        }
        self.search.check()
    }
}

/// Whether an `allow_hosts` entry carries a port (`"10.0.0.5:8080"`, `"[::1]:80"`,
/// `"x.lan:80"`); an IPv6 address alone (`"::1"`, `"[::1]"`) has none.
fn has_port(entry: &str) -> bool {
    let entry = entry.trim();
    let bare = entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or(entry);
    entry.contains(':') && bare.parse::<std::net::Ipv6Addr>().is_err()
}

impl WebSearchConfig {
    fn check(&self) -> Result<(), (String, String)> {
        if !(1..=20).contains(&self.count) {
            return Err((
                "tools.web.search.count".to_owned(),
                "must be between 1 and 20".to_owned(),
            ));
        }
        let key = "tools.web.search.base_url";
        if self.base_url.trim().is_empty() {
            if self.provider == SearchProvider::Searxng {
                return Err((
                    key.to_owned(),
                    "provider \"searxng\" needs the instance's address, e.g. \
                     \"http://127.0.0.1:8888\""
                        .to_owned(),
                ));
            }
            return Ok(());
        }
        check(&self.base_url, HTTP).map_err(|message| (key.to_owned(), message))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_their_key() {
        assert_eq!(WebConfig::default().check(), Ok(()));
        let mut web = WebConfig {
            max_bytes: 0,
            ..WebConfig::default()
        };
        assert_eq!(web.check().unwrap_err().0, "tools.web.max_bytes");
        web.max_bytes = 10;
        web.allow_hosts = vec!["http://x.lan/".into()];
        assert_eq!(web.check().unwrap_err().0, "tools.web.allow_hosts");
        for with_port in ["127.0.0.1:8080", "wiki.lan:80", "[::1]:8080"] {
            web.allow_hosts = vec![with_port.into()];
            let (key, message) = web.check().unwrap_err();
            assert_eq!(key, "tools.web.allow_hosts", "{with_port}");
            assert!(message.contains("has a port"), "{message}");
        }
        web.allow_hosts = vec!["::1".into(), "[fe80::1]".into(), "127.0.0.1".into()];
        assert_eq!(web.check(), Ok(()));
        web.allow_hosts = vec!["x.lan".into()];
        web.search.provider = SearchProvider::Searxng;
        let (key, message) = web.check().unwrap_err();
        assert_eq!(key, "tools.web.search.base_url");
        assert!(message.contains("searxng"), "{message}");
        web.search.base_url = "searx.lan:8888".into();
        assert_eq!(web.check().unwrap_err().0, "tools.web.search.base_url");
        web.search.base_url = "http://searx.lan:8888".into();
        assert_eq!(web.check(), Ok(()));
        web.search.count = 21;
        assert_eq!(web.check().unwrap_err().0, "tools.web.search.count");
    }

    #[test]
    fn providers_parse_by_name() {
        assert_eq!(
            "Brave".parse::<SearchProvider>().unwrap(),
            SearchProvider::Brave
        );
        assert_eq!(SearchProvider::Searxng.to_string(), "searxng");
        assert!("google".parse::<SearchProvider>().is_err());
    }
}
