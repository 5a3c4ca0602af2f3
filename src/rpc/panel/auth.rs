//! Who may use the panel: the login (a token: operator or client), the session cookie, the
//! per-session CSRF token, the same-origin check, and the pace of failed logins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, header};
use tokio::time::Instant;

use super::super::discovery;
use super::super::methods::Role;
use super::super::pace::FailurePace;
pub(super) use super::super::tokens::same_secret;

/// The session cookie's name.
pub(super) const COOKIE: &str = "chela_panel";
/// How long a login lasts.
pub(super) const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Most logged-in sessions kept at once (the oldest goes first).
const MAX_SESSIONS: usize = 32;
/// One logged-in browser.
#[derive(Debug, Clone)]
pub(super) struct Login {
    /// What its token allows.
    pub(super) role: Role,
    /// The token its state-changing requests must carry.
    pub(super) csrf: String,
    /// When it ends.
    pub(super) expires: Instant,
    /// Fires when it is logged out or pushed out: its open event streams end with it.
    pub(super) ended: tokio_util::sync::CancellationToken,
}

/// Why a login was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Not a token of this gateway.
    WrongToken,
    /// The login table is unusable (a poisoned lock).
    Unavailable,
}

/// The panel's logins and its tokens.
pub(super) struct Access {
    token: String,
    operator_token: String,
    logins: Mutex<HashMap<String, Login>>,
    /// Failed logins wait their turn, with the RPC's wrong tokens (one pace for the
    /// listener: guessing on both goes no faster).
    pace: Arc<FailurePace>,
}

impl Access {
    /// Logins checked against the client `token` and the `operator_token`; failed ones
    /// are answered at `pace`.
    pub(super) fn new(token: String, operator_token: String, pace: Arc<FailurePace>) -> Access {
        Access {
            token,
            operator_token,
            logins: Mutex::new(HashMap::new()),
            pace,
        }
    }

    /// Answers a failed login at the listener's pace ([`FailurePace::fail`]): a right
    /// token is never held up, so no lockout another local process could use to keep the
    /// operator out.
    pub(super) async fn fail(&self) {
        self.pace.fail("panel login").await;
    }

    /// Logs in with `presented`: the new session id and its login.
    pub(super) fn login(&self, presented: &str) -> Result<(String, Login), Refused> {
        let now = Instant::now();
        let presented = presented.trim();
        let role = if same_secret(presented, &self.operator_token) {
            Role::Operator
        } else if same_secret(presented, &self.token) {
            Role::Client
        } else {
            return Err(Refused::WrongToken);
        };
        let login = Login {
            role,
            csrf: discovery::new_token(),
            expires: now + SESSION_TTL,
            ended: tokio_util::sync::CancellationToken::new(),
        };
        let id = discovery::new_token();
        let mut logins = self.logins.lock().map_err(|_| Refused::Unavailable)?;
        logins.retain(|_, l| l.expires > now);
        while logins.len() >= MAX_SESSIONS {
            let oldest = logins
                .iter()
                .min_by_key(|(_, l)| l.expires)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| logins.remove(&k)) {
                Some(pushed_out) => pushed_out.ended.cancel(),
                None => break,
            }
        }
        logins.insert(id.clone(), login.clone());
        Ok((id, login))
    }

    /// The login of the request's session cookie, if it is one and has not expired.
    pub(super) fn session(&self, headers: &HeaderMap) -> Option<(String, Login)> {
        let id = cookie(headers, COOKIE)?;
        let logins = self.logins.lock().ok()?;
        // Looked up by comparing every key in constant time: no early exit on a prefix.
        let found = logins
            .iter()
            .find(|(k, _)| same_secret(k, &id))
            .map(|(k, l)| (k.clone(), l.clone()))?;
        (found.1.expires > Instant::now()).then_some(found)
    }

    /// Ends session `id`.
    pub(super) fn logout(&self, id: &str) {
        if let Ok(mut logins) = self.logins.lock()
            && let Some(login) = logins.remove(id)
        {
            login.ended.cancel();
        }
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The `Set-Cookie` value of session `id` (no `Secure`: the panel is plain http on loopback
/// unless a TLS proxy fronts it).
pub(super) fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub(super) fn clear_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// Whether a state-changing request comes from the panel's own pages: its `Origin` (or, when
/// absent, its `Referer`) names the host it was sent to, or is `public` (`[rpc] public_url`'s
/// origin, for a reverse proxy that rewrites `Host`). A request with neither header passes
/// (old browsers and scripts send none; the CSRF token still guards it).
pub(super) fn same_origin(headers: &HeaderMap, public: Option<&str>) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let ours = |origin: &str| {
        public.is_some_and(|p| origin.eq_ignore_ascii_case(p))
            || origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .is_some_and(|rest| rest == host)
    };
    if let Some(origin) = headers.get(header::ORIGIN) {
        return origin.to_str().is_ok_and(ours);
    }
    if let Some(referer) = headers.get(header::REFERER) {
        return referer.to_str().is_ok_and(|r| {
            let origin_end = r
                .find("://")
                .and_then(|at| r[at + 3..].find('/').map(|slash| at + 3 + slash))
                .unwrap_or(r.len());
            ours(&r[..origin_end])
        });
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[tokio::test]
    async fn each_token_logs_in_with_its_role_and_a_cookie_finds_the_session() {
        let access = Access::new("client".into(), "operator".into(), Default::default());
        let (id, login) = access.login("operator").unwrap();
        assert_eq!(login.role, Role::Operator);
        let (_, client) = access.login(" client ").unwrap();
        assert_eq!(client.role, Role::Client);
        let h = headers(&[("cookie", &format!("a=b; {COOKIE}={id}"))]);
        let (found, l) = access.session(&h).unwrap();
        assert_eq!((found.as_str(), l.role), (id.as_str(), Role::Operator));
        access.logout(&id);
        assert!(access.session(&h).is_none());
        assert!(
            access
                .session(&headers(&[("cookie", "chela_panel=nope")]))
                .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn failed_logins_wait_in_turn_and_never_hold_up_the_right_token() {
        let access = std::sync::Arc::new(Access::new(
            "client".into(),
            "operator".into(),
            Default::default(),
        ));
        let start = Instant::now();
        let mut guesses = Vec::new();
        for _ in 0..10 {
            assert_eq!(access.login("guess").unwrap_err(), Refused::WrongToken);
            let access = access.clone();
            guesses.push(tokio::spawn(async move { access.fail().await }));
        }
        // Ten guesses at once: the right token still gets in at once.
        tokio::task::yield_now().await;
        assert!(access.login("operator").is_ok());
        assert_eq!(start.elapsed(), Duration::ZERO);
        for guess in guesses {
            guess.await.unwrap();
        }
        // The ten failures were answered one after the other.
        assert_eq!(
            start.elapsed(),
            super::super::super::pace::FAILURE_DELAY * 10
        );
    }

    #[test]
    fn logging_out_or_being_pushed_out_ends_the_logins_streams() {
        let access = Access::new("client".into(), "operator".into(), Default::default());
        let (id, first) = access.login("client").unwrap();
        access.logout(&id);
        assert!(first.ended.is_cancelled());
        let (_, oldest) = access.login("client").unwrap();
        for _ in 1..MAX_SESSIONS {
            let (_, l) = access.login("client").unwrap();
            assert!(!l.ended.is_cancelled());
        }
        assert!(!oldest.ended.is_cancelled());
        access.login("client").unwrap();
        assert!(oldest.ended.is_cancelled(), "pushed out by the 33rd login");
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_expires() {
        let access = Access::new("client".into(), "operator".into(), Default::default());
        let (id, _) = access.login("client").unwrap();
        let h = headers(&[("cookie", &format!("{COOKIE}={id}"))]);
        assert!(access.session(&h).is_some());
        tokio::time::advance(SESSION_TTL).await;
        assert!(access.session(&h).is_none());
    }

    fn same_origin_here(headers: &HeaderMap) -> bool {
        same_origin(headers, None)
    }

    #[test]
    fn the_public_urls_origin_passes_behind_a_proxy() {
        let proxied = [
            ("host", "127.0.0.1:18789"),
            ("origin", "https://chela.example.com"),
        ];
        let public = Some("https://chela.example.com");
        assert!(!same_origin(&headers(&proxied), None));
        assert!(same_origin(&headers(&proxied), public));
        let other = [
            ("host", "127.0.0.1:18789"),
            ("origin", "https://evil.example.com"),
        ];
        assert!(!same_origin(&headers(&other), public));
        let referer = [
            ("host", "127.0.0.1:18789"),
            ("referer", "https://chela.example.com/panel/pairing"),
        ];
        assert!(same_origin(&headers(&referer), public));
    }

    #[test]
    fn only_the_panels_own_origin_passes() {
        let host = ("host", "127.0.0.1:18789");
        assert!(same_origin_here(&headers(&[host])));
        assert!(same_origin_here(&headers(&[
            host,
            ("origin", "http://127.0.0.1:18789")
        ])));
        assert!(!same_origin_here(&headers(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin_here(&headers(&[host, ("origin", "null")])));
        assert!(same_origin_here(&headers(&[
            host,
            ("referer", "http://127.0.0.1:18789/panel/pairing")
        ])));
        assert!(!same_origin_here(&headers(&[
            host,
            ("referer", "http://127.0.0.1:18789.evil.example/x")
        ])));
        assert!(!same_origin_here(&headers(&[(
            "origin",
            "http://127.0.0.1:18789"
        )])));
    }

    #[test]
    fn the_cookie_is_http_only_and_same_site_strict() {
        let c = set_cookie("abc");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/"));
    }
}
