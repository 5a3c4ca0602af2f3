//! [`FakeWeb`]: a small web site on 127.0.0.1 for `web_fetch` and `web_search` tests: pages
//! with any content type, redirects, error statuses, a body that never ends, a page that never
//! answers, and a fake Brave Search API and SearXNG instance. Every request is recorded.
//!
//! Search endpoints, always present:
//! - `GET /res/v1/web/search?q=..&count=..` (Brave): 401 unless `X-Subscription-Token` is
//!   [`FakeWeb::BRAVE_KEY`]; else `{"web": {"results": [..]}}` with `count` results (default 3)
//!   titled `<q> result <i>`, the description `About <strong>q</strong> &amp; more <i>`.
//! - `GET /search?q=..&format=json` (SearXNG): 403 without `format=json` (as an instance with
//!   the JSON format disabled answers); else `{"results": [..]}`, 4 results with `content`.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What the fake site answers on one path.
#[derive(Debug, Clone)]
pub enum Route {
    /// 200 with this body; `None` sends no `Content-Type` at all.
    Page {
        /// The `Content-Type` header.
        content_type: Option<String>,
        /// The body.
        body: Vec<u8>,
    },
    /// A redirect: `status` (301, 302, 303, 307, 308) to `location` (absolute or relative).
    Redirect {
        /// The status code.
        status: u16,
        /// The `Location` header.
        location: String,
    },
    /// This status with a short text body.
    Status(u16),
    /// 200 `text/plain` whose body goes on for up to 256 MiB of `a`s, 16 KiB a chunk.
    Endless,
    /// Never answers (the handler sleeps for an hour).
    Stall,
}

impl Route {
    /// A page of `content_type` with `body`.
    pub fn page(content_type: &str, body: impl Into<Vec<u8>>) -> Route {
        Route::Page {
            content_type: Some(content_type.to_owned()),
            body: body.into(),
        }
    }

    /// A `302 Found` to `location`.
    pub fn redirect(location: impl Into<String>) -> Route {
        Route::Redirect {
            status: 302,
            location: location.into(),
        }
    }
}

/// One request the site received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebHit {
    /// The path, without the query.
    pub path: String,
    /// The decoded query pairs.
    pub query: Vec<(String, String)>,
    /// The request headers (lower-case names; values that are not text are left out).
    pub headers: HashMap<String, String>,
}

struct Shared {
    routes: HashMap<String, Route>,
    hits: Mutex<Vec<WebHit>>,
}

/// A running fake site; dropping it stops the server.
pub struct FakeWeb {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: watch::Sender<bool>,
}

impl FakeWeb {
    /// The key the fake Brave endpoint accepts.
    pub const BRAVE_KEY: &'static str = "brave-test-key-7f3a";

    /// Starts the site on `127.0.0.1:0` with `routes` (path -> answer) and the search
    /// endpoints.
    pub async fn start(routes: Vec<(&str, Route)>) -> io::Result<FakeWeb> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            routes: routes
                .into_iter()
                .map(|(path, route)| (path.to_owned(), route))
                .collect(),
            hits: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = watch::channel(false);
        drop(crate::serve::spawn(listener, app, stopped));
        Ok(FakeWeb {
            addr,
            shared,
            _stop: stop,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// Every request so far, in order.
    pub fn hits(&self) -> Vec<WebHit> {
        self.shared
            .hits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests asked for `path`.
    pub fn hit_count(&self, path: &str) -> usize {
        self.hits().iter().filter(|h| h.path == path).count()
    }
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let query = parse_query(request.uri().query().unwrap_or(""));
    let headers = request
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let hit = WebHit {
        path: path.clone(),
        query,
        headers,
    };
    shared
        .hits
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(hit.clone());
    match path.as_str() {
        "/res/v1/web/search" => return brave(&hit),
        "/search" => return searxng(&hit),
        _ => {}
    }
    match shared.routes.get(&path).cloned() {
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
        Some(route) => serve(route).await,
    }
}

async fn serve(route: Route) -> Response {
    match route {
        Route::Page { content_type, body } => {
            let mut response = Response::new(Body::from(body));
            if let Some(ct) = content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
                response.headers_mut().insert(header::CONTENT_TYPE, ct);
            }
            response
        }
        Route::Redirect { status, location } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FOUND);
            (status, [(header::LOCATION, location)], "moved").into_response()
        }
        Route::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "fake error").into_response()
        }
        Route::Endless => {
            let chunk = Bytes::from(vec![b'a'; 16 * 1024]);
            let chunks = (0..16 * 1024).map(move |_| Ok::<_, io::Error>(chunk.clone()));
            let body = Body::from_stream(futures_util::stream::iter(chunks));
            ([(header::CONTENT_TYPE, "text/plain")], body).into_response()
        }
        Route::Stall => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "too late".into_response()
        }
    }
}

fn param<'a>(hit: &'a WebHit, name: &str) -> Option<&'a str> {
    hit.query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn brave(hit: &WebHit) -> Response {
    if hit.headers.get("x-subscription-token").map(String::as_str) != Some(FakeWeb::BRAVE_KEY) {
        return (StatusCode::UNAUTHORIZED, "invalid subscription token").into_response();
    }
    let q = param(hit, "q").unwrap_or("");
    let count: usize = param(hit, "count")
        .and_then(|c| c.parse().ok())
        .unwrap_or(3);
    let results: Vec<Value> = (1..=count)
        .map(|i| {
            json!({
                "title": format!("{q} result {i}"),
                "url": format!("https://example.com/{i}"),
                "description": format!("About <strong>{q}</strong> &amp; more {i}"),
                "age": "2 days ago",
                "language": "en",
            })
        })
        .collect();
    axum::Json(json!({
        "type": "search",
        "query": {"original": q},
        "web": {"type": "search", "results": results},
    }))
    .into_response()
}

fn searxng(hit: &WebHit) -> Response {
    if param(hit, "format") != Some("json") {
        return (StatusCode::FORBIDDEN, "Forbidden").into_response();
    }
    let q = param(hit, "q").unwrap_or("");
    let results: Vec<Value> = (1..=4)
        .map(|i| {
            json!({
                "title": format!("{q} page {i}"),
                "url": format!("https://searx.example/{i}"),
                "content": format!("Snippet {i} about {q}"),
                "engine": "duckduckgo",
                "score": 1.0,
            })
        })
        .collect();
    axum::Json(json!({"query": q, "number_of_results": 4, "results": results})).into_response()
}

/// `a=1&b=x+y%21` -> pairs, `+` and `%XX` decoded.
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
