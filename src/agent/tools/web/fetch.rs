//! `web_fetch`: one GET, followed through at most [`MAX_REDIRECTS`] redirects. Every hop's
//! host is resolved here, each address checked ([`super::addr`]), and the request pinned to
//! those addresses (`resolve_to_addrs`), so a name that resolves differently a moment later
//! (DNS rebinding) cannot reach a refused address. No proxy is used. The body is read up to
//! `max_bytes`; HTML becomes Markdown or text, text and JSON stay as they are.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use url::{Host, Url};

use super::addr::{AddrClass, classify, host_listed};
use super::html::{self, Format};
use super::{Resolver, describe, system_resolver};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::args::{self, ArgError};
use crate::agent::tools::truncate::take_head;
use crate::agent::tools::{Tool, ToolContext, ToolOutput, parse_args};
use crate::config::WebConfig;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// Why a fetch failed; the text is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL does not parse or is not http(s).
    #[error("{0}")]
    BadUrl(String),
    /// The host is, or resolves to, an address the config does not open.
    #[error(
        "refused: {host} is {ip}, a {class} address; web_fetch reaches only public addresses \
         (the operator can open this with [tools.web] allow_private or allow_hosts)"
    )]
    Restricted {
        /// The host as written in the URL.
        host: String,
        /// The address it is or resolves to.
        ip: IpAddr,
        /// Its range.
        class: AddrClass,
    },
    /// The host name could not be resolved.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    #[error("too many redirects (more than {MAX_REDIRECTS})")]
    TooManyRedirects,
    /// The request failed (connect, TLS, reset...).
    #[error("request failed: {0}")]
    Http(String),
    /// The final answer was not a success.
    #[error("HTTP {0}")]
    Status(reqwest::StatusCode),
    /// Neither HTML, text nor JSON.
    #[error("unsupported content type {0:?}: web_fetch reads HTML, text and JSON")]
    ContentType(String),
    /// `[tools.web] timeout_s` passed.
    #[error("timed out after {0} s")]
    Timeout(u64),
}

/// What kind of body a content type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
}

/// A body that was read.
#[derive(Debug)]
struct Body {
    url: Url,
    kind: Kind,
    text: String,
    /// Whether `max_bytes` cut it.
    cut: bool,
}

/// Fetches a URL as readable text: `{url, max_chars?, format?}`.
pub struct WebFetchTool {
    config: WebConfig,
    resolve: Resolver,
    /// Conversion slots: the process-wide ones, or a test's.
    slots: Arc<Semaphore>,
}

impl WebFetchTool {
    /// The tool with `[tools.web]` and the system resolver.
    pub fn new(config: &WebConfig) -> Self {
        Self::with_resolver(config, system_resolver())
    }

    /// The tool with its own resolver (tests give fake names fixed addresses).
    pub fn with_resolver(config: &WebConfig, resolve: Resolver) -> Self {
        WebFetchTool {
            config: config.clone(),
            resolve,
            slots: Arc::clone(&CONVERSION_SLOTS),
        }
    }

    /// The tool converting pages within `slots` instead of the process-wide ones.
    #[cfg(test)]
    pub(super) fn with_slots(mut self, slots: Arc<Semaphore>) -> Self {
        self.slots = slots;
        self
    }

    /// Fetches `url` and converts it, both within the timeout; the page, or why not.
    pub async fn fetch(&self, url: &str, format: Format, max_chars: usize) -> ToolOutput {
        let secs = self.config.timeout_s;
        let deadline = crate::domain::deadline::after(Duration::from_secs(secs));
        let timed_out =
            || ToolOutput::error(format!("web_fetch {url}: {}", FetchError::Timeout(secs)));
        let body = match tokio::time::timeout_at(deadline, self.get(url)).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return ToolOutput::error(format!("web_fetch {url}: {e}")),
            Err(_) => return timed_out(),
        };
        let rendered = render(body, format, max_chars, self.config.max_bytes, &self.slots);
        match tokio::time::timeout_at(deadline, rendered).await {
            Ok(text) => ToolOutput::ok(text),
            Err(_) => timed_out(),
        }
    }

    /// GETs `url`, following redirects and checking every hop.
    async fn get(&self, url: &str) -> Result<Body, FetchError> {
        let mut url =
            Url::parse(url.trim()).map_err(|e| FetchError::BadUrl(format!("not a URL ({e})")))?;
        for hop in 0..=MAX_REDIRECTS {
            let pinned = self.check(&url).await?;
            let response = self.send(&url, pinned).await?;
            let status = response.status();
            if !is_redirect(status) {
                return read(response, url, self.config.max_bytes).await;
            }
            if hop == MAX_REDIRECTS {
                return Err(FetchError::TooManyRedirects);
            }
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| FetchError::BadUrl(format!("HTTP {status} without a Location")))?;
            url = url
                .join(location)
                .map_err(|e| FetchError::BadUrl(format!("bad redirect {location:?} ({e})")))?;
        }
        Err(FetchError::TooManyRedirects)
    }

    /// Checks `url`'s scheme and host ([`check_url`]).
    async fn check(&self, url: &Url) -> Result<Vec<SocketAddr>, FetchError> {
        check_url(&self.config, &self.resolve, url).await
    }

    /// One GET to `url`, connecting only to `pinned` when the host is a name.
    async fn send(
        &self,
        url: &Url,
        pinned: Vec<SocketAddr>,
    ) -> Result<reqwest::Response, FetchError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(self.config.user_agent.clone())
            .connect_timeout(Duration::from_secs(self.config.timeout_s));
        if let (Some(Host::Domain(name)), false) = (url.host(), pinned.is_empty()) {
            builder = builder.resolve_to_addrs(name, &pinned);
        }
        let client = builder.build().map_err(|e| FetchError::Http(describe(e)))?;
        client
            .get(url.clone())
            .header(
                ACCEPT,
                "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1",
            )
            .send()
            .await
            .map_err(|e| FetchError::Http(describe(e)))
    }
}

/// Checks `url`'s scheme and host under `config` (`allow_private`, `allow_hosts`), resolving
/// a name with `resolve`; the addresses to connect to (empty for an address literal, which
/// needs no lookup). The browser's proxy checks each of its connections with it too.
pub async fn check_url(
    config: &WebConfig,
    resolve: &Resolver,
    url: &Url,
) -> Result<Vec<SocketAddr>, FetchError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::BadUrl(format!("{url} is not an http(s) URL")));
    }
    let open = |host: &str| config.allow_private || host_listed(host, &config.allow_hosts);
    let refuse = |host: &str, ip: IpAddr| {
        let class = classify(ip);
        (class.is_restricted() && !open(host)).then(|| FetchError::Restricted {
            host: host.to_owned(),
            ip,
            class,
        })
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let name = match url.host() {
        None => return Err(FetchError::BadUrl(format!("{url} has no host"))),
        Some(Host::Ipv4(ip)) => {
            return refuse(&ip.to_string(), ip.into()).map_or(Ok(vec![]), Err);
        }
        Some(Host::Ipv6(ip)) => {
            return refuse(&ip.to_string(), ip.into()).map_or(Ok(vec![]), Err);
        }
        Some(Host::Domain(name)) => name.to_owned(),
    };
    let addrs = (resolve)(name.clone(), port)
        .await
        .map_err(|e| FetchError::Resolve {
            host: name.clone(),
            reason: e.to_string(),
        })?;
    if addrs.is_empty() {
        return Err(FetchError::Resolve {
            host: name,
            reason: "no address".to_owned(),
        });
    }
    if let Some(refused) = addrs.iter().find_map(|a| refuse(&name, a.ip())) {
        return Err(refused);
    }
    Ok(addrs)
}

fn is_redirect(status: reqwest::StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// The kind of a `Content-Type`; `Ok(None)` when there is none (the body decides).
fn kind_of(content_type: Option<&str>) -> Result<Option<Kind>, FetchError> {
    let Some(raw) = content_type else {
        return Ok(None);
    };
    let mime = raw
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "" => Ok(None),
        "text/html" | "application/xhtml+xml" => Ok(Some(Kind::Html)),
        "application/json" | "application/xml" | "application/javascript" => Ok(Some(Kind::Text)),
        m if m.starts_with("text/") || m.ends_with("+json") || m.ends_with("+xml") => {
            Ok(Some(Kind::Text))
        }
        _ => Err(FetchError::ContentType(mime)),
    }
}

/// Reads a success's body up to `max_bytes`.
async fn read(
    mut response: reqwest::Response,
    url: Url,
    max_bytes: u64,
) -> Result<Body, FetchError> {
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status(status));
    }
    let header = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let declared = kind_of(header.as_deref())?;
    let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let mut bytes: Vec<u8> = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| FetchError::Http(describe(e)))?
    {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let kind = match declared {
        Some(kind) => kind,
        None => sniff(&bytes)?,
    };
    // A body cut mid-character ends in U+FFFD; that is dropped.
    let text = super::charset::decode(&bytes, header.as_deref(), kind == Kind::Html)
        .trim_end_matches('\u{fffd}')
        .to_owned();
    Ok(Body {
        url,
        kind,
        text,
        cut,
    })
}

/// The kind of a body sent without a content type: HTML if it starts like HTML, text if it is
/// UTF-8 without NULs, else refused.
fn sniff(bytes: &[u8]) -> Result<Kind, FetchError> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).to_ascii_lowercase();
    let start = head.trim_start();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        return Ok(Kind::Html);
    }
    let text = std::str::from_utf8(bytes).is_ok() && !bytes.contains(&0);
    if text {
        Ok(Kind::Text)
    } else {
        Err(FetchError::ContentType(
            "(none; the body is not text)".to_owned(),
        ))
    }
}

/// The model's view of a fetched body: where it came from, the text, and what was cut.
async fn render(
    body: Body,
    format: Format,
    max_chars: usize,
    max_bytes: u64,
    slots: &Arc<Semaphore>,
) -> String {
    let mut html_cut = false;
    let (title, text) = match body.kind {
        Kind::Text => (None, body.text),
        Kind::Html => {
            let (html, cut) = cap_html(body.text);
            html_cut = cut;
            let page = convert_apart(html, format, slots).await;
            (page.title, page.text)
        }
    };
    let mut out = format!("URL: {}\n", body.url);
    if let Some(title) = title {
        out.push_str(&format!("Title: {title}\n"));
    }
    out.push('\n');
    let total = text.chars().count();
    out.push_str(take_head(&text, max_chars));
    if body.cut {
        out.push_str(&format!(
            "\n\n[cut: the page is larger than {max_bytes} bytes; only its start was read]"
        ));
    }
    if html_cut {
        out.push_str(&format!(
            "\n\n[cut: only the first {MAX_HTML_BYTES} bytes of the HTML were converted]"
        ));
    }
    if total > max_chars {
        out.push_str(&format!(
            "\n\n[truncated: {max_chars} of {total} chars shown]"
        ));
    }
    out
}

/// HTML bytes converted at most; the rest of a larger page is dropped (and the model told).
pub const MAX_HTML_BYTES: usize = 1 << 20;

/// Conversions running at once, process-wide; more wait for a slot.
pub const CONVERSIONS_AT_ONCE: usize = 2;

/// The slots of [`CONVERSIONS_AT_ONCE`].
static CONVERSION_SLOTS: LazyLock<Arc<Semaphore>> =
    LazyLock::new(|| Arc::new(Semaphore::new(CONVERSIONS_AT_ONCE)));

/// `html` cut to [`MAX_HTML_BYTES`] at a character boundary; whether it was cut.
fn cap_html(mut html: String) -> (String, bool) {
    if html.len() <= MAX_HTML_BYTES {
        return (html, false);
    }
    let mut end = MAX_HTML_BYTES;
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    html.truncate(end);
    (html, true)
}

/// Converts HTML on a thread of its own (the converter recurses, and a page is CPU work),
/// once one of `slots` is free. The thread keeps its slot until it ends, even when the caller
/// stops waiting (timeout, cancel), so no more than the slots ever convert at once.
pub(super) async fn convert_apart(
    html: String,
    format: Format,
    slots: &Arc<Semaphore>,
) -> html::Page {
    let failed = || html::Page {
        title: None,
        text: "(the page could not be converted)".to_owned(),
    };
    let Ok(permit) = Arc::clone(slots).acquire_owned().await else {
        return failed();
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("web-html".to_owned())
        .stack_size(16 << 20)
        .spawn(move || {
            let _ = tx.send(html::convert(&html, format));
            drop(permit);
        });
    match spawned {
        Ok(_) => rx.await.unwrap_or_else(|_| failed()),
        Err(_) => failed(),
    }
}

/// The call's arguments.
struct FetchArgs {
    url: String,
    format: Format,
    max_chars: Option<u64>,
}

fn parse(m: &serde_json::Map<String, Value>) -> Result<FetchArgs, ArgError> {
    let format = match args::optional_str(m, "format")?.map(str::trim) {
        None | Some("markdown") => Format::Markdown,
        Some("text") => Format::Text,
        Some(other) => {
            return Err(ArgError::invalid(format!(
                "argument `format` must be \"markdown\" or \"text\", got {other:?}"
            )));
        }
    };
    let max_chars = args::optional_u64(m, "max_chars")?;
    if max_chars == Some(0) {
        return Err(ArgError::invalid("argument `max_chars` must be at least 1"));
    }
    Ok(FetchArgs {
        url: args::required_str(m, "url")?.to_owned(),
        format,
        max_chars,
    })
}

impl Tool for WebFetchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_fetch".to_owned(),
            description: "Fetch an http(s) page as Markdown (main content) or text.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "format": {"type": "string", "enum": ["markdown", "text"]},
                    "max_chars": {"type": "integer", "minimum": 1}
                },
                "required": ["url"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let a = match parse_args(&args, parse) {
                Ok(a) => a,
                Err(out) => return out,
            };
            let cap = self.config.max_chars;
            let max_chars = a
                .max_chars
                .map_or(cap, |n| usize::try_from(n).unwrap_or(usize::MAX).min(cap));
            tokio::select! {
                out = self.fetch(&a.url, a.format, max_chars) => out,
                () = ctx.cancel.cancelled() => ToolOutput::error("web_fetch cancelled"),
            }
        })
    }
}
