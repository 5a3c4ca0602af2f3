//! The web tools (SPEC 7): `web_fetch` reads one page as Markdown or text, `web_search` asks
//! the configured search provider. Both run in the gateway process (no sandbox, no child),
//! configured by `[tools.web]`.
//!
//! - [`addr`]: which addresses `web_fetch` may reach.
//! - [`html`]: HTML to Markdown or text, main content only.
//! - [`nesting`]: the linear nesting estimate that guards the parser.
//! - [`fetch`]: `web_fetch`, resolving each hop itself and connecting to the checked address.
//! - [`search`]: `web_search` over Brave Search or SearXNG.

pub mod addr;
pub mod charset;
pub mod fetch;
pub mod html;
pub mod nesting;
pub mod search;

#[cfg(test)]
mod fetch_tests;
#[cfg(test)]
mod search_tests;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use super::Tool;
use crate::agent::provider::BoxFuture;
use crate::config::WebConfig;

pub use fetch::WebFetchTool;
pub use search::WebSearchTool;

/// Looks up a host name's addresses: `(host, port)` -> socket addresses. `web_fetch` checks
/// these and then connects to exactly them.
pub type Resolver =
    Arc<dyn Fn(String, u16) -> BoxFuture<'static, io::Result<Vec<SocketAddr>>> + Send + Sync>;

/// The system resolver (`getaddrinfo` on a blocking thread).
pub fn system_resolver() -> Resolver {
    Arc::new(|host: String, port: u16| {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    })
}

/// `web_fetch` and `web_search` as `[tools.web]` sets them up (`BRAVE_API_KEY` read from the
/// environment now).
pub fn tools(config: &WebConfig) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(WebFetchTool::new(config)),
        Arc::new(WebSearchTool::new(config, &|name| std::env::var(name).ok())),
    ]
}

/// A reqwest error's text without its URL (which may carry credentials), with its causes.
pub(crate) fn describe(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if timeout {
        text.push_str(" (timed out)");
    }
    text
}
