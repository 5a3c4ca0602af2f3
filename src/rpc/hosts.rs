//! The `Host` check of the RPC listener. A page on another site can make a browser send
//! requests to 127.0.0.1 under a name of its own (DNS rebinding); they carry that name in
//! `Host`. So every request must name an IP address, `localhost`, or a host of
//! `[rpc] allowed_hosts` / `public_url`; any other gets `421 Misdirected Request`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The host names a listener answers to beyond IP addresses and `localhost`.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    names: Vec<String>,
}

impl Hosts {
    /// Allows `names` (lower-case, no ports) besides IP addresses and `localhost`.
    pub fn new(names: Vec<String>) -> Hosts {
        Hosts { names }
    }

    /// Whether a request whose `Host` header is `host` may be served. A request without one
    /// passes: browsers always send it, so its absence is no rebinding.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return true;
        };
        let name = without_port(host.trim()).trim_end_matches('.');
        name.parse::<IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// `host` without its `:port`; an IPv6 literal without its brackets.
fn without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The middleware: refuses a request whose `Host` is not allowed.
pub async fn check(State(hosts): State<Arc<Hosts>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{0}"));
    if hosts.allows(host) {
        return next.run(request).await;
    }
    tracing::warn!(
        host = host.unwrap_or(""),
        "rpc: request for an unknown host refused (add it to [rpc] allowed_hosts)"
    );
    (
        StatusCode::MISDIRECTED_REQUEST,
        "unknown host: add it to [rpc] allowed_hosts (or set [rpc] public_url)\n",
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_localhost_pass_other_names_must_be_listed() {
        let hosts = Hosts::new(vec!["chela.lan".to_owned()]);
        for ok in [
            "127.0.0.1:18789",
            "127.0.0.1",
            "[::1]:18789",
            "10.0.0.7:80",
            "localhost:18789",
            "LOCALHOST",
            "localhost.:1",
            "chela.lan:18789",
            "Chela.Lan",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example:18789",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "chela.lan.evil.example",
            "\u{0}",
            "",
        ] {
            assert!(!hosts.allows(Some(refused)), "{refused}");
        }
        assert!(hosts.allows(None));
    }
}
