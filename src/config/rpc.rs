//! `[rpc]`: the gateway API over WebSocket (`/ws`, JSON frames; docs/rpc.md).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// The default address: loopback only.
pub const DEFAULT_RPC_LISTEN: &str = "127.0.0.1:18789";

/// `[rpc]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RpcConfig {
    /// Address the RPC listens on (`host:port`); empty turns the RPC off.
    pub listen: String,
    /// Bearer token every client must present; env `CHELA_RPC_TOKEN` when empty. When both
    /// are empty the gateway makes a random token at start and keeps it beside the store
    /// (readable by this user only), where the local `chela` commands find it.
    pub token: String,
    /// Whether the web control panel is served at `/panel` on the same listener
    /// (docs/panel.md; it always needs a login with one of the tokens).
    pub panel: bool,
    /// Host names the listener answers to besides IP addresses and `localhost` (the `Host`
    /// header of every request is checked, so a DNS-rebinding page cannot reach it).
    pub allowed_hosts: Vec<String>,
    /// The address browsers use when the listener sits behind a reverse proxy
    /// (`https://chela.example.com`): its host is allowed and the panel takes its form posts
    /// as same-origin. Empty: none.
    pub public_url: String,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_RPC_LISTEN.to_owned(),
            token: String::new(),
            panel: true,
            allowed_hosts: Vec::new(),
            public_url: String::new(),
        }
    }
}

impl RpcConfig {
    /// The address to listen on, or `None` when the RPC is off. Call [`RpcConfig::check`]
    /// first: an address that does not parse is `None` here too.
    pub fn address(&self) -> Option<SocketAddr> {
        let listen = self.listen.trim();
        if listen.is_empty() {
            return None;
        }
        listen.parse().ok()
    }

    /// The configured token, trimmed; `None` when empty.
    pub fn configured_token(&self) -> Option<&str> {
        Some(self.token.trim()).filter(|t| !t.is_empty())
    }

    /// The origin (`scheme://host[:port]`) of [`RpcConfig::public_url`], lower-cased; `None`
    /// when it is empty or not an http(s) URL.
    pub fn public_origin(&self) -> Option<String> {
        let url = url::Url::parse(self.public_url.trim()).ok()?;
        matches!(url.scheme(), "http" | "https").then_some(())?;
        let origin = url.origin().ascii_serialization();
        (origin != "null").then(|| origin.to_ascii_lowercase())
    }

    /// The host names requests may name: [`RpcConfig::allowed_hosts`] and the host of
    /// [`RpcConfig::public_url`], lower-cased, without ports.
    pub fn host_names(&self) -> Vec<String> {
        let public = url::Url::parse(self.public_url.trim())
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned));
        self.allowed_hosts
            .iter()
            .map(|h| h.trim().to_owned())
            .chain(public)
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect()
    }

    /// Checks the table: `Err((key, message))` names the key at fault.
    pub fn check(&self) -> Result<(), (String, String)> {
        if !self.public_url.trim().is_empty() && self.public_origin().is_none() {
            return Err((
                "rpc.public_url".to_owned(),
                format!(
                    "{:?} is not an http(s) URL like \"https://chela.example.com\"",
                    self.public_url
                ),
            ));
        }
        if let Some(bad) = self.allowed_hosts.iter().find(|h| !is_host_name(h)) {
            return Err((
                "rpc.allowed_hosts".to_owned(),
                format!("{bad:?} is not a host name (no scheme, port or path: \"chela.lan\")"),
            ));
        }
        let listen = self.listen.trim();
        if listen.is_empty() {
            return Ok(());
        }
        let address: SocketAddr = listen.parse().map_err(|_| {
            (
                "rpc.listen".to_owned(),
                format!(
                    "{listen:?} is not an address like {DEFAULT_RPC_LISTEN:?} (or \"\" to turn the RPC off)"
                ),
            )
        })?;
        let remote = !address.ip().is_loopback();
        match self.configured_token() {
            None if remote => Err((
                "rpc.token".to_owned(),
                format!(
                    "rpc.listen {listen:?} is reachable from other machines: set rpc.token (or CHELA_RPC_TOKEN) to a long random secret, or listen on 127.0.0.1"
                ),
            )),
            Some(token) if (remote || self.public_origin().is_some()) && !is_strong(token) => {
                let reach = match remote {
                    true => format!("rpc.listen {listen:?}"),
                    false => format!("rpc.public_url {:?}", self.public_url),
                };
                Err((
                    "rpc.token".to_owned(),
                    format!(
                        "{reach} makes the RPC reachable from other machines: rpc.token (or CHELA_RPC_TOKEN) must be at least {MIN_TOKEN_CHARS} characters with at least {MIN_TOKEN_DISTINCT} different ones (e.g. the output of `openssl rand -hex 32`)"
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Shortest `rpc.token` taken when the RPC is reachable from other machines.
pub const MIN_TOKEN_CHARS: usize = 32;
/// Fewest different characters such a token must have (`aaaa…` is no secret).
pub const MIN_TOKEN_DISTINCT: usize = 8;

/// Whether `token` is strong enough for a listener other machines reach: at least
/// [`MIN_TOKEN_CHARS`] characters, at least [`MIN_TOKEN_DISTINCT`] of them different.
fn is_strong(token: &str) -> bool {
    let distinct: std::collections::BTreeSet<char> = token.chars().collect();
    token.chars().count() >= MIN_TOKEN_CHARS && distinct.len() >= MIN_TOKEN_DISTINCT
}

/// Whether `name` is a bare host name (letters, digits, `-`, `.`).
fn is_host_name(name: &str) -> bool {
    let name = name.trim();
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// The discovery file of the RPC of a gateway whose store is at `store_path`:
/// `<store.path>.rpc` (address, pid, tokens; this user only).
pub fn discovery_path_for(store_path: &std::path::Path) -> std::path::PathBuf {
    let mut name = store_path.as_os_str().to_owned();
    name.push(".rpc");
    std::path::PathBuf::from(name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn rpc(listen: &str, token: &str) -> RpcConfig {
        RpcConfig {
            listen: listen.to_owned(),
            token: token.to_owned(),
            ..RpcConfig::default()
        }
    }

    #[test]
    fn public_url_gives_an_origin_and_a_host_name() {
        let mut config = rpc("127.0.0.1:0", "");
        config.allowed_hosts = vec!["Chela.LAN".to_owned()];
        config.public_url = "https://Chela.Example.com/panel".to_owned();
        assert!(config.check().is_ok());
        assert_eq!(
            config.public_origin().as_deref(),
            Some("https://chela.example.com")
        );
        assert_eq!(config.host_names(), ["chela.lan", "chela.example.com"]);
        config.public_url = "http://proxy:8443".to_owned();
        assert_eq!(config.public_origin().as_deref(), Some("http://proxy:8443"));
    }

    #[test]
    fn bad_public_url_or_host_names_the_key() {
        let mut config = rpc("127.0.0.1:0", "");
        config.public_url = "chela.example.com".to_owned();
        assert_eq!(config.check().unwrap_err().0, "rpc.public_url");
        config.public_url = "ftp://chela.example.com".to_owned();
        assert_eq!(config.check().unwrap_err().0, "rpc.public_url");
        config.public_url = String::new();
        config.allowed_hosts = vec!["http://chela.lan:80".to_owned()];
        assert_eq!(config.check().unwrap_err().0, "rpc.allowed_hosts");
    }

    #[test]
    fn empty_listen_turns_the_rpc_off() {
        assert_eq!(rpc("", "").address(), None);
        assert!(rpc(" ", "").check().is_ok());
    }

    #[test]
    fn loopback_needs_no_configured_token() {
        assert!(rpc("127.0.0.1:0", "").check().is_ok());
        assert!(rpc("[::1]:18789", "").check().is_ok());
        assert_eq!(
            RpcConfig::default().address(),
            Some("127.0.0.1:18789".parse().unwrap())
        );
    }

    #[test]
    fn other_addresses_without_a_token_name_rpc_token() {
        let (key, message) = rpc("0.0.0.0:18789", " ").check().unwrap_err();
        assert_eq!(key, "rpc.token");
        assert!(message.contains("0.0.0.0:18789"), "{message}");
        assert!(rpc("0.0.0.0:18789", STRONG).check().is_ok());
    }

    /// 64 hex characters, as `openssl rand -hex 32` gives.
    const STRONG: &str = "3f9c2a7b1e8d4c6f0a5b9e2d7c1f4a8b6e3d0c9f2a7b5e1d8c4f6a0b3e9d2c7f";

    #[test]
    fn a_reachable_listener_needs_a_strong_token() {
        // Issue #32.8: a one-character token was taken on a non-loopback listen.
        for weak in [
            "x",
            "s3cret",
            &"a".repeat(64),
            &"ab".repeat(20),
            &STRONG[..31],
        ] {
            let (key, message) = rpc("0.0.0.0:18789", weak).check().unwrap_err();
            assert_eq!(key, "rpc.token", "{weak}");
            assert!(message.contains("at least 32 characters"), "{message}");
        }
        assert!(rpc("192.168.1.5:18789", &STRONG[..32]).check().is_ok());
        // Behind a reverse proxy the loopback listener is reachable too.
        let mut proxied = rpc("127.0.0.1:18789", "s3cret");
        proxied.public_url = "https://chela.example.com".to_owned();
        let (key, message) = proxied.check().unwrap_err();
        assert_eq!(key, "rpc.token");
        assert!(message.contains("rpc.public_url"), "{message}");
        proxied.token = STRONG.to_owned();
        assert!(proxied.check().is_ok());
        // On loopback alone any token does (only this machine reaches it).
        assert!(rpc("127.0.0.1:18789", "x").check().is_ok());
    }

    #[test]
    fn a_bad_address_names_rpc_listen() {
        let (key, _) = rpc("localhost", "").check().unwrap_err();
        assert_eq!(key, "rpc.listen");
    }
}
