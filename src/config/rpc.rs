//! `[rpc]`: the gateway API over WebSocket (`/ws`, JSON frames; README "RPC").

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
    /// Whether the web control panel is served at `/panel` on the same listener (README
    /// "Control panel"; it always needs a login with one of the tokens).
    pub panel: bool,
}

impl Default for RpcConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_RPC_LISTEN.to_owned(),
            token: String::new(),
            panel: true,
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

    /// Checks the table: `Err((key, message))` names the key at fault.
    pub fn check(&self) -> Result<(), (String, String)> {
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
        if !address.ip().is_loopback() && self.configured_token().is_none() {
            return Err((
                "rpc.token".to_owned(),
                format!(
                    "rpc.listen {listen:?} is reachable from other machines: set rpc.token (or CHELA_RPC_TOKEN) to a long random secret, or listen on 127.0.0.1"
                ),
            ));
        }
        Ok(())
    }
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
            panel: true,
        }
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
        assert!(rpc("0.0.0.0:18789", "s3cret").check().is_ok());
    }

    #[test]
    fn a_bad_address_names_rpc_listen() {
        let (key, _) = rpc("localhost", "").check().unwrap_err();
        assert_eq!(key, "rpc.listen");
    }
}
