//! `web_search`: a query to the provider `[tools.web.search]` names, Brave Search's API
//! (`GET <base>/res/v1/web/search`, key in `X-Subscription-Token`) or a SearXNG instance
//! (`GET <base>/search?format=json`), answered as a short numbered list. The key never appears
//! in a result or a log line: errors are built without the request's URL. Redirects are not
//! followed (the key's header would go along to wherever they point), no proxy is used, and
//! the key goes only over https (or plain http to a loopback address, for tests).

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::ACCEPT;
use serde::Deserialize;
use serde_json::{Value, json};

use super::describe;
use super::html::plain_text;
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::args::{self, ArgError};
use crate::agent::tools::{Tool, ToolContext, ToolOutput, parse_args};
use crate::config::{SearchProvider, WebConfig};

/// Brave Search's API, when `base_url` does not say otherwise.
pub const BRAVE_BASE: &str = "https://api.search.brave.com";
/// The environment variable holding Brave's key when `api_key` is empty.
pub const BRAVE_KEY_ENV: &str = "BRAVE_API_KEY";
/// The most results one call may ask for.
pub const MAX_COUNT: u64 = 20;
/// The largest search answer read (a page of 20 results is a few tens of kB).
pub const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// A provider ready to ask.
#[derive(Clone)]
enum Provider {
    Brave { key: String, base: String },
    Searxng { base: String },
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provider::Brave { base, .. } => write!(f, "Brave {{ base: {base:?}, key: <set> }}"),
            Provider::Searxng { .. } => f.write_str("Searxng"),
        }
    }
}

impl Provider {
    fn name(&self) -> &'static str {
        match self {
            Provider::Brave { .. } => "Brave Search",
            Provider::Searxng { .. } => "SearXNG",
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The page's title.
    pub title: String,
    /// Its address.
    pub url: String,
    /// A short excerpt, as plain text.
    pub snippet: String,
}

/// Searches the web: `{query, count?}`.
#[derive(Debug)]
pub struct WebSearchTool {
    /// The provider, or what is missing to have one.
    provider: Result<Provider, String>,
    timeout: Duration,
    count: u64,
    user_agent: String,
}

impl WebSearchTool {
    /// The tool `[tools.web]` describes; `env` looks up `BRAVE_API_KEY` when `api_key` is
    /// empty.
    pub fn new(config: &WebConfig, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let search = &config.search;
        let base = search.base_url.trim().trim_end_matches('/').to_owned();
        let provider = match search.provider {
            SearchProvider::None => Err(
                "no search provider is configured: set [tools.web.search] provider = \"brave\" \
                 (with api_key or env BRAVE_API_KEY) or \"searxng\" (with base_url)"
                    .to_owned(),
            ),
            SearchProvider::Brave => {
                let key = Some(search.api_key.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .or_else(|| env(BRAVE_KEY_ENV).map(|k| k.trim().to_owned()))
                    .filter(|k| !k.is_empty());
                let base = if base.is_empty() {
                    BRAVE_BASE.to_owned()
                } else {
                    base
                };
                match key {
                    Some(_) if !safe_for_key(&base) => Err(format!(
                        "[tools.web.search] base_url {base:?} would send the Brave key in the \
                         clear: use https:// (plain http only to a loopback address)"
                    )),
                    Some(key) => Ok(Provider::Brave { key, base }),
                    None => Err(format!(
                        "Brave Search needs a key: set [tools.web.search] api_key or the \
                         environment variable {BRAVE_KEY_ENV}"
                    )),
                }
            }
            SearchProvider::Searxng => Ok(Provider::Searxng { base }),
        };
        WebSearchTool {
            provider,
            timeout: Duration::from_secs(config.timeout_s),
            count: u64::from(search.count),
            user_agent: config.user_agent.clone(),
        }
    }

    /// Runs one search: up to `count` hits, or the reason there are none.
    pub async fn search(&self, query: &str, count: u64) -> Result<Vec<Hit>, String> {
        let provider = self.provider.as_ref().map_err(Clone::clone)?;
        // No redirects (reqwest would carry the key's header to another host) and no proxy.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.timeout)
            .user_agent(self.user_agent.clone())
            .build()
            .map_err(describe)?;
        let request = match provider {
            Provider::Brave { key, base } => client
                .get(format!("{base}/res/v1/web/search"))
                .query(&[("q", query), ("count", &count.to_string())])
                .header("X-Subscription-Token", key.as_str()),
            Provider::Searxng { base } => client
                .get(format!("{base}/search"))
                .query(&[("q", query), ("format", "json")]),
        };
        let response = request
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{} did not answer: {}", provider.name(), describe(e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(refusal(provider, status));
        }
        let bytes = read_capped(response, provider.name()).await?;
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} sent no JSON: {e}", provider.name()))?;
        let mut hits = match provider {
            Provider::Brave { .. } => brave_hits(body),
            Provider::Searxng { .. } => searxng_hits(body),
        };
        hits.truncate(usize::try_from(count).unwrap_or(usize::MAX));
        Ok(hits)
    }
}

/// A search answer's body, refused when larger than [`MAX_RESPONSE_BYTES`].
async fn read_capped(mut response: reqwest::Response, name: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("{name} answer broke off: {}", describe(e)))?
    {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "{name} answered more than {MAX_RESPONSE_BYTES} bytes; not read"
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Whether Brave's key may go to `base`: https, or plain http to a loopback address.
fn safe_for_key(base: &str) -> bool {
    let Ok(url) = url::Url::parse(base) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Domain(name))) => name.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        _ => false,
    }
}

/// What a failed status means, per provider.
fn refusal(provider: &Provider, status: StatusCode) -> String {
    let name = provider.name();
    match (provider, status.as_u16()) {
        (_, 300..=399) => format!(
            "{name} answered with a redirect (HTTP {status}), which is not followed; \
             check [tools.web.search] base_url"
        ),
        (Provider::Brave { .. }, 401 | 403) => {
            format!("{name} refused the key (HTTP {status}); check [tools.web.search] api_key")
        }
        (Provider::Searxng { .. }, 403) => format!(
            "{name} refused the JSON format (HTTP {status}); enable it in the instance's \
             settings.yml: search: formats: [html, json]"
        ),
        (_, 429) => format!("{name} is rate limiting (HTTP {status}); try again later"),
        _ => format!("{name} answered HTTP {status}"),
    }
}

#[derive(Deserialize)]
struct BraveResponse {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<RawHit>,
}

#[derive(Deserialize)]
struct SearxngResponse {
    #[serde(default)]
    results: Vec<RawHit>,
}

/// A result as either provider sends it (Brave: `description`, SearXNG: `content`).
#[derive(Deserialize)]
struct RawHit {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

impl RawHit {
    fn into_hit(self) -> Option<Hit> {
        if self.url.trim().is_empty() {
            return None;
        }
        let snippet = self.description.or(self.content).unwrap_or_default();
        Some(Hit {
            title: plain_text(&self.title),
            url: self.url.trim().to_owned(),
            snippet: plain_text(&snippet),
        })
    }
}

fn brave_hits(body: Value) -> Vec<Hit> {
    serde_json::from_value::<BraveResponse>(body)
        .ok()
        .and_then(|r| r.web)
        .map(|w| w.results.into_iter().filter_map(RawHit::into_hit).collect())
        .unwrap_or_default()
}

fn searxng_hits(body: Value) -> Vec<Hit> {
    serde_json::from_value::<SearxngResponse>(body)
        .map(|r| r.results.into_iter().filter_map(RawHit::into_hit).collect())
        .unwrap_or_default()
}

/// Hits as the model reads them: a numbered list of title, URL and snippet.
pub fn render(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No results for {query:?}.");
    }
    let mut out = format!("Results for {query:?}:\n");
    for (i, hit) in hits.iter().enumerate() {
        let title = if hit.title.is_empty() {
            &hit.url
        } else {
            &hit.title
        };
        out.push_str(&format!("\n{}. {title}\n   {}\n", i + 1, hit.url));
        if !hit.snippet.is_empty() {
            out.push_str(&format!("   {}\n", hit.snippet));
        }
    }
    out
}

fn parse(m: &serde_json::Map<String, Value>) -> Result<(String, Option<u64>), ArgError> {
    let query = args::required_str(m, "query")?.trim().to_owned();
    if query.is_empty() {
        return Err(ArgError::invalid("argument `query` must not be empty"));
    }
    let count = args::optional_u64(m, "count")?;
    if count == Some(0) {
        return Err(ArgError::invalid("argument `count` must be at least 1"));
    }
    Ok((query, count))
}

impl Tool for WebSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_search".to_owned(),
            description: "Search the web: title, URL and snippet per result.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}
                },
                "required": ["query"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let (query, count) = match parse_args(&args, parse) {
                Ok(a) => a,
                Err(out) => return out,
            };
            let count = count.unwrap_or(self.count).min(MAX_COUNT);
            tokio::select! {
                found = self.search(&query, count) => match found {
                    Ok(hits) => ToolOutput::ok(render(&query, &hits)),
                    Err(e) => ToolOutput::error(format!("web_search: {e}")),
                },
                () = ctx.cancel.cancelled() => ToolOutput::error("web_search cancelled"),
            }
        })
    }
}
