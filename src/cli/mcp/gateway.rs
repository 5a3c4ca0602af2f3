//! The MCP tools' way to the running gateway: one RPC call per tool call, on a fresh
//! connection with the client token ([`super::super::rpc::connect_client`]), bounded by
//! [`RPC_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use chela::config::LoadedConfig;
use chela::rpc::client::ClientError;
use serde_json::Value;

use crate::cli::rpc::{ClientAccess, ConnectError, connect_client};

/// The longest one tool's RPC call (connecting included) may take.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a tool's call to the gateway failed (the tool's error text).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No connection with the client token.
    #[error("{0}")]
    Connect(#[from] ConnectError),
    /// The gateway answered with an error.
    #[error("the gateway refused {method}: {message}")]
    Refused {
        /// The RPC method.
        method: String,
        /// What the gateway said.
        message: String,
    },
    /// The connection failed during the call.
    #[error("the gateway's RPC failed during {method}: {source}")]
    Rpc {
        /// The RPC method.
        method: String,
        /// What happened.
        source: ClientError,
    },
    /// No answer in time.
    #[error(
        "the gateway did not answer {method} within {} s (is it overloaded or stuck? `chela status` tells)", RPC_TIMEOUT.as_secs()
    )]
    Timeout {
        /// The RPC method.
        method: String,
    },
}

/// Where the gateway is and how to reach it, shared by the tools.
#[derive(Clone)]
pub struct Gateway {
    loaded: Arc<LoadedConfig>,
    access: Arc<ClientAccess>,
}

impl Gateway {
    /// The gateway of `loaded`'s store, or the one `access` names.
    pub fn new(loaded: LoadedConfig, access: ClientAccess) -> Gateway {
        Gateway {
            loaded: Arc::new(loaded),
            access: Arc::new(access),
        }
    }

    /// Calls `method` with `params` and gives its result, within [`RPC_TIMEOUT`].
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        self.clone().call_here(method.to_owned(), params).await
    }

    /// [`Gateway::call`], owning its arguments.
    async fn call_here(self, method: String, params: Value) -> Result<Value, CallError> {
        let call = async {
            let mut client = connect_client(&self.loaded, &self.access).await?;
            let answer = client.call(&method, params).await;
            client.close().await;
            answer.map_err(|e| match e {
                ClientError::Fault(fault) => CallError::Refused {
                    method: method.clone(),
                    message: fault.message,
                },
                source => CallError::Rpc {
                    method: method.clone(),
                    source,
                },
            })
        };
        let timed_out = || CallError::Timeout {
            method: method.clone(),
        };
        tokio::time::timeout(RPC_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
    }
}
