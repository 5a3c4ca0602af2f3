//! rmcp's streamable HTTP client transport over chela's reqwest 0.12 (rmcp's ready-made
//! client is for reqwest 0.13): [`transport`] reaches one `[mcp.servers.NAME]` with a `url`.
//!
//! - `client`: the `StreamableHttpClient` methods of [`ReqwestClient`] (POST a message, GET
//!   the server's event stream, DELETE the session), with rmcp's response limits.
//! - `sse`: a bounded `text/event-stream` parser yielding rmcp's event type.

mod client;
mod sse;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue, InvalidHeaderName, InvalidHeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// Longest wait for the TCP (and TLS) connection to a server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers the transport (rmcp, this client or reqwest) sets itself, lowercase.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// The prefix of the per-argument headers (SEP-2243) rmcp sets itself.
const RESERVED_HEADER_PREFIX: &str = "mcp-param-";

/// Settings of one HTTP MCP server.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HttpTarget {
    /// The server's endpoint, an http or https URL.
    pub url: String,
    /// Headers sent on every request, by name (an `Authorization` header included as given).
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for HttpTarget {
    /// The URL and the header names only: the values may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTarget")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a transport cannot be built (bad URL, bad header name or value, a reserved header such
/// as Mcp-Session-Id or Accept).
#[derive(Debug, thiserror::Error)]
pub enum HttpSetupError {
    /// The URL does not parse (the URL is not repeated: it may hold a token).
    #[error("bad MCP server URL: {0}")]
    Url(#[source] url::ParseError),
    /// The URL's scheme is neither http nor https.
    #[error("MCP server URL has scheme {0:?}, not http or https")]
    Scheme(String),
    /// A header name is not a valid HTTP header name.
    #[error("bad header name {name:?}")]
    HeaderName {
        /// The name as configured.
        name: String,
        /// What is wrong with it.
        #[source]
        source: InvalidHeaderName,
    },
    /// A header value is not a valid HTTP header value (the value is not repeated).
    #[error("bad value of header {name}")]
    HeaderValue {
        /// The header's name.
        name: String,
        /// What is wrong with the value.
        #[source]
        source: InvalidHeaderValue,
    },
    /// A header the transport sets itself.
    #[error("header {0} is set by the MCP transport itself")]
    Reserved(String),
    /// reqwest could not build its client.
    #[error("cannot set up HTTP: {0}")]
    Client(#[source] reqwest::Error),
}

/// The client transport for `target`: headers sent on every request (an `Authorization`
/// header included as given).
///
/// Call it inside a Tokio runtime: rmcp spawns the transport's worker here.
pub fn transport(
    target: &HttpTarget,
) -> Result<StreamableHttpClientTransport<ReqwestClient>, HttpSetupError> {
    let url = endpoint(&target.url)?;
    let headers = custom_headers(&target.headers)?;
    let client = ReqwestClient::new()?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// The reqwest 0.12 client rmcp drives.
#[derive(Clone, Debug)]
pub struct ReqwestClient(reqwest::Client);

impl ReqwestClient {
    /// A client that follows no redirect (a POST must not turn into a GET elsewhere, and
    /// headers must not reach another host) and gives up connecting after 10 seconds.
    fn new() -> Result<ReqwestClient, HttpSetupError> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map(ReqwestClient)
            .map_err(HttpSetupError::Client)
    }
}

/// `url` checked: it parses, and is http or https.
fn endpoint(url: &str) -> Result<String, HttpSetupError> {
    let parsed = url::Url::parse(url).map_err(HttpSetupError::Url)?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed.into()),
        other => Err(HttpSetupError::Scheme(other.to_owned())),
    }
}

/// The configured headers as rmcp takes them, each value marked sensitive (kept out of
/// reqwest's and rmcp's debug output).
fn custom_headers(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<HeaderName, HeaderValue>, HttpSetupError> {
    let mut out = HashMap::with_capacity(headers.len());
    for (name, value) in headers {
        let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|source| {
            HttpSetupError::HeaderName {
                name: name.clone(),
                source,
            }
        })?;
        if is_reserved(&parsed) {
            return Err(HttpSetupError::Reserved(name.clone()));
        }
        let mut value =
            HeaderValue::from_str(value).map_err(|source| HttpSetupError::HeaderValue {
                name: name.clone(),
                source,
            })?;
        value.set_sensitive(true);
        out.insert(parsed, value);
    }
    Ok(out)
}

/// Whether the transport sets `name` itself (header names are lowercase once parsed).
fn is_reserved(name: &HeaderName) -> bool {
    let name = name.as_str();
    RESERVED_HEADERS.contains(&name) || name.starts_with(RESERVED_HEADER_PREFIX)
}
