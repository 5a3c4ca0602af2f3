//! The WebSocket server: `GET /ws` with the token (`Authorization: Bearer TOKEN` or
//! `?token=TOKEN`), then JSON frames (see [`super::protocol`]). The operator token (made at
//! each start, kept in the discovery file) opens every method; the client token all but the
//! operator's ([`Role`]). Requests of one connection
//! run concurrently (at most [`MAX_IN_FLIGHT`]), so a long `agent.wait` does not hold up a
//! `status`. Stopped with the gateway: intake first.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::RpcError;
use super::api::GatewayApi;
use super::discovery::{self, Discovery};
use super::feed::{self, SubscribeParams};
use super::methods::{Methods, Role};
use super::pace::FailurePace;
use super::protocol::{self, Fault, UNAVAILABLE};
use super::runs::RunTracker;
use super::tokens::{bearer, query_token, same_secret};

/// Most requests one connection may have running at once.
pub const MAX_IN_FLIGHT: usize = 16;
/// Most connections at once.
const MAX_CONNECTIONS: usize = 64;
/// Frames queued for one connection's socket (answers wait; events past it are dropped).
const OUTBOX: usize = 512;
/// Largest frame a client may send.
const MAX_FRAME: usize = 1 << 20;

struct Shared {
    methods: Methods,
    token: String,
    operator_token: String,
    /// Wrong tokens wait their turn (`/ws` and `/metrics`).
    pace: Arc<FailurePace>,
    stop: CancellationToken,
    connections: Arc<Semaphore>,
}

/// A running RPC server.
pub struct RpcServer {
    address: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    discovery: PathBuf,
}

impl RpcServer {
    /// Starts the RPC of the gateway when `[rpc] listen` is set; `None` when it is off.
    pub async fn start(api: Arc<dyn GatewayApi>) -> Result<Option<RpcServer>, RpcError> {
        let config = api.config();
        let Some(address) = config.rpc.address() else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| RpcError::Bind { address, source })?;
        let address = listener
            .local_addr()
            .map_err(|source| RpcError::Bind { address, source })?;
        let configured = config.rpc.configured_token().map(str::to_owned);
        let token = configured.clone().unwrap_or_else(discovery::new_token);
        let operator_token = discovery::new_token();
        let discovery_path = discovery::path_for(&config.store.path);
        discovery::write(
            &discovery_path,
            &Discovery {
                address: address.to_string(),
                pid: std::process::id(),
                token: configured.is_none().then(|| token.clone()),
                operator_token: Some(operator_token.clone()),
            },
        )
        .map_err(|source| RpcError::Discovery {
            path: discovery_path.clone(),
            source,
        })?;
        let stop = api.shutdown().child_token();
        let runs = RunTracker::spawn(api.rpc_channel().subscribe(), stop.clone());
        let shared = Arc::new(Shared {
            methods: Methods { api, runs },
            token,
            operator_token,
            pace: Arc::new(FailurePace::default()),
            stop: stop.clone(),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        });
        let app = axum::Router::new()
            .route("/ws", axum::routing::get(upgrade))
            .merge(super::ops::routes(
                shared.methods.api.clone(),
                address,
                vec![shared.token.clone(), shared.operator_token.clone()],
                shared.pace.clone(),
            ))
            .with_state(shared.clone())
            .merge(super::panel::router(
                shared.methods.api.clone(),
                &shared.token,
                &shared.operator_token,
                shared.pace.clone(),
                stop.clone(),
            ));
        let hosts = super::hosts::Hosts::new(shared.methods.api.config().rpc.host_names());
        let app = app.layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts),
            super::hosts::check,
        ));
        let graceful = stop.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { graceful.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "rpc server ended");
            }
        });
        tracing::info!("rpc listening on {address}");
        if shared.methods.api.config().rpc.panel {
            tracing::info!(
                "control panel at http://{address}/panel/ (`chela panel` says how to log in)"
            );
        }
        Ok(Some(RpcServer {
            address,
            stop,
            task,
            discovery: discovery_path,
        }))
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops taking connections, closes the open ones and removes the discovery file.
    pub async fn stop(self) {
        self.stop.cancel();
        discovery::remove(&self.discovery);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.task).await;
    }
}

/// `GET /ws`: checks the token, then upgrades.
async fn upgrade(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
    ws: WebSocketUpgrade,
) -> Response {
    let presented = bearer(&headers).or_else(|| query_token(&uri));
    let tokens = [
        (shared.operator_token.as_str(), Role::Operator),
        (shared.token.as_str(), Role::Client),
    ];
    let Some(role) = authorize(&tokens, &shared.pace, presented.as_deref()).await else {
        return (StatusCode::UNAUTHORIZED, "missing or wrong token\n").into_response();
    };
    let Ok(permit) = shared.connections.clone().try_acquire_owned() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many connections\n").into_response();
    };
    ws.max_message_size(MAX_FRAME)
        .on_upgrade(move |socket| async move {
            connection(socket, shared, role).await;
            drop(permit);
        })
}

/// The role of the token `presented` among `tokens`; a missing or wrong one is refused only
/// after the refusals before it and [`FAILURE_DELAY`](super::pace::FAILURE_DELAY) (a right
/// one is never held up).
async fn authorize(
    tokens: &[(&str, Role)],
    pace: &FailurePace,
    presented: Option<&str>,
) -> Option<Role> {
    let role = presented.and_then(|p| {
        tokens
            .iter()
            .find(|(token, _)| same_secret(p, token))
            .map(|(_, role)| *role)
    });
    if role.is_none() {
        pace.fail("connection").await;
    }
    role
}

/// Serves one connection until the client leaves or the gateway stops.
async fn connection(mut socket: WebSocket, shared: Arc<Shared>, role: Role) {
    let (out_tx, mut out_rx) = mpsc::channel::<String>(OUTBOX);
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // Dropped with the connection: its requests and its event feed end with it.
    let mut tasks = tokio::task::JoinSet::new();
    // The connection's event feed's filter; a new `events.subscribe` changes it.
    let mut feed: Option<tokio::sync::watch::Sender<SubscribeParams>> = None;
    loop {
        let frame = tokio::select! {
            _ = shared.stop.cancelled() => {
                let _ = socket.send(Message::Close(None)).await;
                return;
            }
            Some(frame) = out_rx.recv() => frame,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    match protocol::parse(text.as_str()) {
                        Err((id, fault)) => protocol::answer(id, Err(fault)),
                        Ok(request) if request.method == "events.subscribe" => {
                            match SubscribeParams::parse(&request.params) {
                                Ok(filter) => {
                                    let session = filter.session.clone();
                                    match feed.as_ref().filter(|running| !running.is_closed()) {
                                        // The same feed with the new filter: nothing between the two is lost.
                                        Some(running) => {
                                            let _ = running.send(filter);
                                        }
                                        None => {
                                            // Subscribed before the answer goes out: nothing after it
                                            // is missed.
                                            let sources = feed::Sources::of(shared.methods.api.as_ref());
                                            let (filter_tx, filter_rx) = tokio::sync::watch::channel(filter);
                                            let stop = shared.stop.clone();
                                            tasks.spawn(feed::feed(sources, stop, filter_rx, out_tx.clone()));
                                            feed = Some(filter_tx);
                                        }
                                    }
                                    let answer = serde_json::json!({ "subscribed": true, "session": session });
                                    protocol::answer(request.id, Ok(answer))
                                }
                                Err(fault) => protocol::answer(request.id, Err(fault)),
                            }
                        }
                        Ok(request) => {
                            let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                                let fault = Fault::new(
                                    UNAVAILABLE,
                                    format!("too many requests in flight (at most {MAX_IN_FLIGHT})"),
                                );
                                let _ = socket
                                    .send(Message::Text(protocol::answer(request.id, Err(fault)).into()))
                                    .await;
                                continue;
                            };
                            let (shared, out) = (shared.clone(), out_tx.clone());
                            tasks.spawn(async move {
                                let result = shared.methods.call_as(role, &request.method, &request.params).await;
                                let _ = out.send(protocol::answer(request.id, result)).await;
                                drop(permit);
                            });
                            continue;
                        }
                    }
                }
                Some(Ok(Message::Binary(_))) => protocol::answer(
                    serde_json::Value::Null,
                    Err(Fault::new(protocol::INVALID_REQUEST, "send JSON as text frames")),
                ),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                // Pings are answered by the WebSocket layer.
                Some(Ok(_)) => continue,
            },
        };
        if socket.send(Message::Text(frame.into())).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wrong_tokens_wait_in_turn_and_a_right_one_does_not() {
        use super::super::pace::FAILURE_DELAY;
        use tokio::time::Instant;
        let pace = Arc::new(FailurePace::default());
        let start = Instant::now();
        let guesses: Vec<_> = ["x", "client-", "", "operato", "CLIENT"]
            .into_iter()
            .map(|guess| {
                let pace = pace.clone();
                tokio::spawn(async move {
                    let tokens = [("operator", Role::Operator), ("client", Role::Client)];
                    authorize(&tokens, &pace, Some(guess)).await
                })
            })
            .collect();
        tokio::task::yield_now().await;
        // While five guesses wait, the right tokens get in at once.
        let tokens = [("operator", Role::Operator), ("client", Role::Client)];
        assert_eq!(
            authorize(&tokens, &pace, Some("client")).await,
            Some(Role::Client)
        );
        assert_eq!(
            authorize(&tokens, &pace, Some("operator")).await,
            Some(Role::Operator)
        );
        assert_eq!(start.elapsed(), Duration::ZERO);
        for guess in guesses {
            assert_eq!(guess.await.unwrap(), None);
        }
        assert!(
            start.elapsed() >= FAILURE_DELAY * 5,
            "{:?}",
            start.elapsed()
        );
        let before = Instant::now();
        assert_eq!(authorize(&tokens, &pace, None).await, None);
        assert!(before.elapsed() >= FAILURE_DELAY, "no token waits too");
    }
}
