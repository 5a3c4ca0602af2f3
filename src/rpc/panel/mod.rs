//! The web control panel at `/panel` on the RPC's listener (docs/panel.md):
//! server-rendered pages, a small script for the live run feed (Server-Sent Events), assets
//! embedded in the binary. Every page and action needs a login (loopback too: the agent's own
//! shell can reach 127.0.0.1); a request without one gets the same answer on every path.
//!
//! - `auth`: logins, session cookie, CSRF token, same-origin check, failed-login limit.
//! - `html`: escaping and the page frame.
//! - `pages`: overview, sessions, pairing, bindings, dead letters, config.
//! - `transcript`: one session's transcript, the live runs page and its event stream.
//! - `actions`: the POST actions.

mod actions;
mod auth;
mod html;
mod nodes;
mod page;
mod pages;
mod transcript;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::api::GatewayApi;
use auth::{Access, Login, Refused};
use html::Viewer;

/// The panel's stylesheet.
const CSS: &str = include_str!("assets/panel.css");
/// The panel's script (the live feed, confirmations).
const JS: &str = include_str!("assets/panel.js");

/// The security headers of every panel answer.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the panel's handlers share.
struct Panel {
    api: Arc<dyn GatewayApi>,
    access: Access,
    started: std::time::Instant,
    /// `[rpc] public_url`'s origin: form posts from it are the panel's own.
    public_origin: Option<String>,
    /// Ends the event streams when the server stops.
    stop: tokio_util::sync::CancellationToken,
}

/// The panel's routes (`/panel` and everything under it), or none when `[rpc] panel = false`.
/// `token` is the client token, `operator_token` the operator's; failed logins are answered
/// at `pace` (the listener's, with its wrong tokens); `stop` ends the open event
/// streams (the server waits for every connection before it stops).
pub fn router(
    api: Arc<dyn GatewayApi>,
    token: &str,
    operator_token: &str,
    pace: Arc<super::pace::FailurePace>,
    stop: tokio_util::sync::CancellationToken,
) -> axum::Router {
    if !api.config().rpc.panel {
        return axum::Router::new();
    }
    let public_origin = api.config().rpc.public_origin();
    let panel = Arc::new(Panel {
        api,
        public_origin,
        access: Access::new(token.to_owned(), operator_token.to_owned(), pace),
        started: std::time::Instant::now(),
        stop,
    });
    axum::Router::new()
        // The listener's root leads here (a newcomer opens the address the log shows).
        .route(
            "/",
            axum::routing::get(|| async { axum::response::Redirect::to("/panel/") }),
        )
        .route("/panel", axum::routing::any(serve))
        .route("/panel/", axum::routing::any(serve))
        .route("/panel/{*rest}", axum::routing::any(serve))
        .with_state(panel)
}

/// Every panel request: public paths first, then the login check, then the page or action.
async fn serve(
    State(panel): State<Arc<Panel>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/');
    let path = if path.is_empty() { "/panel" } else { path };
    match (&method, path) {
        (&Method::GET, "/panel/assets/panel.css") => return asset(CSS, "text/css"),
        (&Method::GET, "/panel/assets/panel.js") => return asset(JS, "text/javascript"),
        (&Method::GET, "/panel/login") => return html(StatusCode::OK, html::login(None)),
        (&Method::POST, "/panel/login") => return login(&panel, &headers, &body).await,
        _ => {}
    }
    let Some((id, login)) = panel.access.session(&headers) else {
        return refused(&method);
    };
    let viewer = Viewer {
        role: login.role,
        csrf: &login.csrf,
    };
    let query = form(uri.query().unwrap_or("").as_bytes());
    match method {
        Method::GET if path == "/panel/events" => transcript::events(&panel, &query, &login),
        Method::GET => pages::get(&panel, &viewer, path, &query).await,
        Method::POST => {
            if !auth::same_origin(&headers, panel.public_origin.as_deref()) {
                tracing::warn!(path, "panel: cross-site request refused");
                return plain(StatusCode::FORBIDDEN, "cross-site request refused\n");
            }
            let fields = form(&body);
            let presented = fields
                .get("csrf")
                .map(String::as_str)
                .or_else(|| headers.get("x-csrf-token").and_then(|v| v.to_str().ok()));
            if !presented.is_some_and(|t| auth::same_secret(t, &login.csrf)) {
                tracing::warn!(path, "panel: request without a valid CSRF token refused");
                return plain(StatusCode::FORBIDDEN, "missing or wrong CSRF token\n");
            }
            if path == "/panel/logout" {
                panel.access.logout(&id);
                return redirect("/panel/login", Some(auth::clear_cookie()));
            }
            actions::post(&panel, &viewer, path, &fields).await
        }
        _ => plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

/// The answer to a request without a valid login, the same on every path: pages go to the
/// login page, everything else is refused.
fn refused(method: &Method) -> Response {
    match *method {
        Method::GET | Method::HEAD => redirect("/panel/login", None),
        _ => plain(StatusCode::FORBIDDEN, "log in first\n"),
    }
}

/// `POST /panel/login`: the token of the form; a cookie on success.
async fn login(panel: &Panel, headers: &HeaderMap, body: &[u8]) -> Response {
    if !auth::same_origin(headers, panel.public_origin.as_deref()) {
        return plain(StatusCode::FORBIDDEN, "cross-site request refused\n");
    }
    let fields = form(body);
    let token = fields.get("token").map(String::as_str).unwrap_or("");
    match panel.access.login(token) {
        Ok((id, Login { role, .. })) => {
            tracing::info!(?role, "panel: logged in");
            redirect("/panel", Some(auth::set_cookie(&id)))
        }
        Err(Refused::WrongToken) => {
            panel.access.fail().await;
            html(StatusCode::UNAUTHORIZED, html::login(Some("Wrong token.")))
        }
        Err(Refused::Unavailable) => html(
            StatusCode::SERVICE_UNAVAILABLE,
            html::login(Some(
                "The panel cannot log you in now; see the gateway's log.",
            )),
        ),
    }
}

/// The fields of a urlencoded form or query.
fn form(bytes: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}

/// Headers every panel answer carries.
fn secure(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An HTML answer.
fn html(status: StatusCode, body: String) -> Response {
    secure(
        (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
    )
}

/// A plain-text answer.
fn plain(status: StatusCode, text: &'static str) -> Response {
    secure(
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            text,
        )
            .into_response(),
    )
}

/// An embedded asset.
fn asset(body: &'static str, kind: &'static str) -> Response {
    secure(([(header::CONTENT_TYPE, kind)], body).into_response())
}

/// A `303 See Other` to `to`, setting `cookie` when given.
fn redirect(to: &'static str, cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    secure(response)
}
