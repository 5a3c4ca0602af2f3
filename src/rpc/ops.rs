//! Routes for monitoring on the RPC listener: `GET /metrics` (OpenMetrics text,
//! [`crate::metrics`]), `GET /healthz` (200 while the process serves) and `GET /readyz` (200
//! when the store answers and every channel is connected, else 503 naming what is not).
//!
//! Who may scrape: the probes are open (they say no more than "ready" or which channel is
//! down, and orchestrators call them without credentials). `/metrics` holds no secret but
//! shows activity: on a loopback listener it is open, on any other address it needs the RPC
//! token (client or operator) as `Authorization: Bearer TOKEN`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::api::GatewayApi;
use super::pace::FailurePace;
use super::tokens::{bearer, same_secret};

/// What the routes need.
struct Ops {
    api: Arc<dyn GatewayApi>,
    /// The tokens `/metrics` takes; `None`: open (a loopback listener).
    scrape_tokens: Option<Vec<String>>,
    /// Held while the gauges are read: scrapes at once wait for each other instead of
    /// reading the store side by side.
    reading: tokio::sync::Mutex<()>,
    /// Wrong tokens wait their turn, as on `/ws`.
    pace: Arc<FailurePace>,
}

/// The monitoring routes for a listener on `address`; off loopback `/metrics` takes one of
/// `tokens`, and a wrong one is answered at `pace`.
pub fn routes<S>(
    api: Arc<dyn GatewayApi>,
    address: SocketAddr,
    tokens: Vec<String>,
    pace: Arc<FailurePace>,
) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let proxied = api.config().rpc.public_origin().is_some();
    let ops = Arc::new(Ops {
        api,
        scrape_tokens: scrape_tokens(address, proxied, tokens),
        reading: tokio::sync::Mutex::new(()),
        pace,
    });
    axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ops)
}

/// The tokens `/metrics` takes on a listener at `address`: none asked on loopback, unless a
/// reverse proxy makes it reachable from outside (`proxied`: `[rpc] public_url` is set).
fn scrape_tokens(address: SocketAddr, proxied: bool, tokens: Vec<String>) -> Option<Vec<String>> {
    (proxied || !address.ip().is_loopback()).then_some(tokens)
}

/// Whether a request with `headers` may scrape.
fn may_scrape(tokens: Option<&[String]>, headers: &HeaderMap) -> bool {
    let Some(tokens) = tokens else {
        return true;
    };
    bearer(headers).is_some_and(|p| tokens.iter().any(|t| same_secret(&p, t)))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(ops): State<Arc<Ops>>) -> Response {
    let not_ready = ops.api.readiness().await.not_ready();
    let body = serde_json::json!({ "ready": not_ready.is_empty(), "notReady": not_ready });
    let status = match not_ready.is_empty() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(ops): State<Arc<Ops>>, headers: HeaderMap) -> Response {
    if !may_scrape(ops.scrape_tokens.as_deref(), &headers) {
        ops.pace.fail("scrape").await;
        return (StatusCode::UNAUTHORIZED, "missing or wrong token\n").into_response();
    }
    let gauges = {
        let _one_at_a_time = ops.reading.lock().await;
        ops.api.gauges().await
    };
    match crate::metrics::global().render(&gauges) {
        Ok(text) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn with_bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = format!("Bearer {token}");
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn loopback_scrapes_freely_other_addresses_need_a_token() {
        let tokens = vec!["client".to_owned(), "operator".to_owned()];
        let loopback = scrape_tokens("127.0.0.1:8080".parse().unwrap(), false, tokens.clone());
        assert!(may_scrape(loopback.as_deref(), &HeaderMap::new()));
        let v6 = scrape_tokens("[::1]:8080".parse().unwrap(), false, tokens.clone());
        assert!(may_scrape(v6.as_deref(), &HeaderMap::new()));
        let proxied = scrape_tokens("127.0.0.1:8080".parse().unwrap(), true, tokens.clone());
        assert!(!may_scrape(proxied.as_deref(), &HeaderMap::new()));
        assert!(may_scrape(proxied.as_deref(), &with_bearer("client")));
        let open = scrape_tokens("0.0.0.0:8080".parse().unwrap(), false, tokens);
        assert!(!may_scrape(open.as_deref(), &HeaderMap::new()));
        assert!(!may_scrape(open.as_deref(), &with_bearer("wrong")));
        assert!(may_scrape(open.as_deref(), &with_bearer("client")));
        assert!(may_scrape(open.as_deref(), &with_bearer("operator")));
    }
}
