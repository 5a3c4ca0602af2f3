//! A small RPC client, used by `chela agent`, `chela status` and `chela sessions list` when a
//! running gateway holds the store.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};

use super::protocol::Fault;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Another process holds the store and announces no RPC.
    #[error(
        "the store at {} is in use by another chela process (a running gateway?) that serves no RPC: stop it, or set [rpc] listen in the gateway's config so chela agent, status and sessions list can reach it", store.display()
    )]
    NoRpc {
        /// The store folder.
        store: std::path::PathBuf,
    },
    /// No connection could be made.
    #[error("cannot reach the gateway's RPC at {address}: {reason}")]
    Connect {
        /// Where it was tried.
        address: String,
        /// What happened.
        reason: String,
    },
    /// The gateway refused the token.
    #[error(
        "the gateway at {address} refused the RPC token; use the gateway's rpc.token (or CHELA_RPC_TOKEN)"
    )]
    Unauthorized {
        /// Where it was tried.
        address: String,
    },
    /// The gateway answered with an error.
    #[error("the gateway answered: {}", .0.message)]
    Fault(Fault),
    /// The connection ended before the answer.
    #[error("the RPC connection ended: {0}")]
    Closed(String),
    /// The answer was not what the protocol says.
    #[error("unexpected answer from the gateway: {0}")]
    Protocol(String),
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to the RPC of the gateway that holds the store at `store` (found through its
/// discovery file) as its operator: with the operator token of the discovery file, else
/// `token` when configured, else the client token the gateway made.
pub async fn connect_to_store(
    store: &std::path::Path,
    token: Option<&str>,
) -> Result<RpcClient, ClientError> {
    let no_rpc = || ClientError::NoRpc {
        store: store.to_path_buf(),
    };
    let found = super::discovery::read(&super::discovery::path_for(store)).ok_or_else(no_rpc)?;
    let token = found
        .operator_token
        .or(token.map(str::to_owned))
        .or(found.token)
        .unwrap_or_default();
    RpcClient::connect(&found.address, &token).await
}

/// One connection to a gateway's RPC.
pub struct RpcClient {
    socket: Socket,
    next_id: u64,
}

impl RpcClient {
    /// Connects to `ws://<address>/ws` with `token`.
    pub async fn connect(address: &str, token: &str) -> Result<RpcClient, ClientError> {
        let connect_error = |reason: String| ClientError::Connect {
            address: address.to_owned(),
            reason,
        };
        let mut request = format!("ws://{address}/ws")
            .into_client_request()
            .map_err(|e| connect_error(e.to_string()))?;
        let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| connect_error("the token has characters a header cannot carry".into()))?;
        request.headers_mut().insert(header::AUTHORIZATION, bearer);
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => Ok(RpcClient { socket, next_id: 1 }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response))
                if response.status() == StatusCode::UNAUTHORIZED =>
            {
                Err(ClientError::Unauthorized {
                    address: address.to_owned(),
                })
            }
            Err(e) => Err(connect_error(e.to_string())),
        }
    }

    /// Calls `method` and waits for its answer (events in between are skipped).
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.call_watching(method, params, &mut |_| {}).await
    }

    /// Calls `method` and waits for its answer, handing every event frame that comes in the
    /// meantime to `on_event`.
    pub async fn call_watching(
        &mut self,
        method: &str,
        params: Value,
        on_event: &mut (dyn FnMut(&Value) + Send),
    ) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let frame = json!({ "id": id, "method": method, "params": params }).to_string();
        self.socket
            .send(Message::Text(frame))
            .await
            .map_err(|e| ClientError::Closed(e.to_string()))?;
        loop {
            let message = match self.socket.next().await {
                Some(Ok(message)) => message,
                Some(Err(e)) => return Err(ClientError::Closed(e.to_string())),
                None => return Err(ClientError::Closed("closed by the gateway".into())),
            };
            let text = match message {
                Message::Text(text) => text,
                Message::Close(_) => {
                    return Err(ClientError::Closed("closed by the gateway".into()));
                }
                _ => continue,
            };
            let value: Value =
                serde_json::from_str(&text).map_err(|e| ClientError::Protocol(e.to_string()))?;
            if value.get("id") != Some(&json!(id)) {
                if value.get("event").is_some() {
                    on_event(&value);
                }
                continue;
            }
            if let Some(error) = value.get("error") {
                let fault: Fault = serde_json::from_value(error.clone())
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                return Err(ClientError::Fault(fault));
            }
            return value
                .get("result")
                .cloned()
                .ok_or_else(|| ClientError::Protocol(format!("no result in {text}")));
        }
    }

    /// Closes the connection politely.
    pub async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}
