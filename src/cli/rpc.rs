//! Reaching a running gateway over its RPC, for the commands that would otherwise open the
//! store it holds (`chela agent`, `status`, `sessions list|show|export`, `pairing`, `doctor`),
//! and, with the client token only, for `chela mcp serve` ([`connect_client`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::rpc::client::{ClientError, RpcClient};
use chela::rpc::discovery::Discovery;

/// Connects to the RPC of the gateway holding this config's store.
pub async fn connect(loaded: &LoadedConfig) -> Result<RpcClient, ClientError> {
    chela::rpc::client::connect_to_store(
        &loaded.config.store.path,
        loaded.config.rpc.configured_token(),
    )
    .await
}

/// Why a client-only connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No address was given and no gateway announces one.
    #[error(
        "no running chela gateway found (no {}): start `chela gateway`, or give its RPC address with --url or CHELA_RPC_URL", path.display()
    )]
    NoGateway {
        /// The discovery file looked for.
        path: PathBuf,
    },
    /// The address given is not one the client can use.
    #[error("{url:?} is not a gateway RPC address: give ws://HOST:PORT (or HOST:PORT)")]
    BadUrl {
        /// What was given.
        url: String,
    },
    /// The token file could not be read.
    #[error("cannot read the token file {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No client token was found anywhere.
    #[error(
        "no RPC client token: give it with --token-file or CHELA_RPC_TOKEN (the gateway's rpc.token)"
    )]
    NoToken,
    /// The gateway could not be reached or refused.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// What a client-only connection was told explicitly: `--url` or `CHELA_RPC_URL`, and the
/// token of `--token-file` or `CHELA_RPC_TOKEN`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAccess {
    /// The RPC's address, `HOST:PORT`.
    pub address: Option<String>,
    /// The client token.
    pub token: Option<String>,
}

impl ClientAccess {
    /// The access `url` and `token_file` give, else the environment (`lookup`) does.
    pub fn from_args(
        url: Option<String>,
        token_file: Option<&Path>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ClientAccess, ConnectError> {
        let given = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let address = match given(url.or_else(|| lookup("CHELA_RPC_URL"))) {
            Some(url) => Some(address_of(&url)?),
            None => None,
        };
        let token =
            match token_file {
                Some(path) => Some(std::fs::read_to_string(path).map_err(|source| {
                    ConnectError::TokenFile {
                        path: path.to_path_buf(),
                        source,
                    }
                })?),
                None => lookup("CHELA_RPC_TOKEN"),
            };
        Ok(ClientAccess {
            address,
            token: given(token),
        })
    }
}

/// `HOST:PORT` of `ws://HOST:PORT[/ws]` or `HOST:PORT`.
fn address_of(url: &str) -> Result<String, ConnectError> {
    let bad = || ConnectError::BadUrl {
        url: url.to_owned(),
    };
    let rest = url.strip_prefix("ws://").unwrap_or(url);
    let address = rest
        .strip_suffix("/ws")
        .unwrap_or(rest)
        .trim_end_matches('/');
    match address.rsplit_once(':') {
        Some((host, port))
            if !host.is_empty() && port.parse::<u16>().is_ok() && !address.contains('/') =>
        {
            Ok(address.to_owned())
        }
        _ => Err(bad()),
    }
}

/// The address and token a client-only connection uses: `access`'s, else the config's
/// `rpc.token` (`configured`), else the discovery file's (`found`) client token; never the
/// discovery file's operator token.
pub fn client_endpoint(
    access: &ClientAccess,
    configured: Option<&str>,
    found: Option<Discovery>,
    discovery: &Path,
) -> Result<(String, String), ConnectError> {
    let (found_address, found_token) = match found {
        Some(found) => (Some(found.address), found.token),
        None => (None, None),
    };
    let address =
        access
            .address
            .clone()
            .or(found_address)
            .ok_or_else(|| ConnectError::NoGateway {
                path: discovery.to_path_buf(),
            })?;
    let token = access
        .token
        .clone()
        .or(configured.map(str::to_owned))
        .or(found_token)
        .ok_or(ConnectError::NoToken)?;
    Ok((address, token))
}

/// Connects to the running gateway's RPC with the client token only ([`client_endpoint`]):
/// its operator-only methods (pairing, cron changes, ending a session) stay refused.
pub async fn connect_client(
    loaded: &LoadedConfig,
    access: &ClientAccess,
) -> Result<RpcClient, ConnectError> {
    let discovery = chela::rpc::discovery::path_for(&loaded.config.store.path);
    let found = match access.address.is_some() && access.token.is_some() {
        true => None,
        false => chela::rpc::discovery::read(&discovery),
    };
    let configured = loaded.config.rpc.configured_token();
    let (address, token) = client_endpoint(access, configured, found, &discovery)?;
    Ok(RpcClient::connect(&address, &token).await?)
}

/// Prints `error` and gives the exit code: 1 for a failure the gateway reported, 2 when it
/// could not be reached.
pub fn report(error: &ClientError) -> ExitCode {
    eprintln!("chela: {error}");
    match error {
        ClientError::Fault(_) => ExitCode::FAILURE,
        _ => ExitCode::from(2),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn found() -> Option<Discovery> {
        Some(Discovery {
            address: "127.0.0.1:4000".into(),
            pid: 1,
            token: Some("client".into()),
            operator_token: Some("operator".into()),
        })
    }

    #[test]
    fn the_client_token_is_taken_never_the_operator_token() {
        let path = Path::new("data.rpc");
        let none = ClientAccess::default();
        let got = client_endpoint(&none, None, found(), path).unwrap();
        assert_eq!(got, ("127.0.0.1:4000".into(), "client".into()));
        let got = client_endpoint(&none, Some("configured"), found(), path).unwrap();
        assert_eq!(got.1, "configured");
        let mut only_operator = found();
        if let Some(found) = only_operator.as_mut() {
            found.token = None;
        }
        let refused = client_endpoint(&none, None, only_operator, path);
        assert!(matches!(refused, Err(ConnectError::NoToken)), "{refused:?}");
    }

    #[test]
    fn what_is_given_comes_first_and_no_gateway_is_said() {
        let path = Path::new("data.rpc");
        let env = |name: &str| match name {
            "CHELA_RPC_URL" => Some("ws://10.0.0.2:18789/ws".to_owned()),
            "CHELA_RPC_TOKEN" => Some(" env-token\n".to_owned()),
            _ => None,
        };
        let access = ClientAccess::from_args(None, None, &env).unwrap();
        let got = client_endpoint(&access, Some("configured"), found(), path).unwrap();
        assert_eq!(got, ("10.0.0.2:18789".into(), "env-token".into()));
        let access = ClientAccess::from_args(Some("h:1".into()), None, &|_| None).unwrap();
        assert_eq!(access.address.as_deref(), Some("h:1"));
        let missing = client_endpoint(&ClientAccess::default(), None, None, path);
        let said = missing.unwrap_err().to_string();
        assert!(said.contains("start `chela gateway`"), "{said}");
        for bad in ["http://h:1", "ws://h", "h:1/x", ":80"] {
            let refused = ClientAccess::from_args(Some(bad.into()), None, &|_| None);
            assert!(matches!(refused, Err(ConnectError::BadUrl { .. })), "{bad}");
        }
    }
}
