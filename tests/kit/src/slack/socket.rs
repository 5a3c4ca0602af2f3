//! Socket Mode connections at `/socket` (any query): `hello` first, then the envelopes the
//! fake routes to this connection; acknowledgements (`{"envelope_id": ..}`) are recorded. A
//! test can send `disconnect` (the socket closes about a second later, or when the client
//! closes it) or drop the connection abruptly.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::json;
use super::params::Params;
use super::state::{Outgoing, Shared};
use super::web::ApiResult;

/// How long a socket told to disconnect stays open at most.
const DISCONNECT_GRACE: Duration = Duration::from_secs(1);

/// `GET /socket` with an upgrade: hands the socket to a connection task.
pub(crate) async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve(socket, shared))
}

/// `apps.connections.open`: a Socket Mode URL with a new ticket (any ticket is accepted, as
/// often as it is used).
pub(crate) fn connections_open(shared: &Shared, _params: &Params) -> ApiResult {
    let mut state = shared.lock();
    state.tickets += 1;
    let base = shared.base_url.replacen("http://", "ws://", 1);
    Ok(json!({ "url": format!("{base}/socket?ticket={}", state.tickets) }))
}

/// The connection ended.
#[derive(Debug)]
struct Ended;

async fn serve(mut socket: WebSocket, shared: Arc<Shared>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let count = shared.lock().conns.len() + 1;
    if send(&mut socket, json::hello(count).to_string())
        .await
        .is_err()
    {
        return;
    }
    let conn = {
        let mut state = shared.lock();
        let conn = state.open_connection(tx);
        state.flush();
        conn
    };
    shared.touch();
    let _ = run(&mut socket, &shared, &mut rx).await;
    shared.lock().close_connection(conn);
    shared.touch();
    // Dropping the socket closes the TCP connection (a close frame was sent only after a
    // `disconnect`).
    drop(socket);
}

/// Sends one text frame.
async fn send(socket: &mut WebSocket, text: String) -> Result<(), Ended> {
    socket
        .send(Message::Text(text.into()))
        .await
        .map_err(|_| Ended)
}

/// Relays outgoing frames and reads acknowledgements until the connection ends.
async fn run(
    socket: &mut WebSocket,
    shared: &Shared,
    rx: &mut mpsc::UnboundedReceiver<Outgoing>,
) -> Result<(), Ended> {
    let mut close_at: Option<Instant> = None;
    loop {
        let closing = async {
            match close_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            outgoing = rx.recv() => match outgoing {
                None | Some(Outgoing::Drop) => return Err(Ended),
                Some(Outgoing::Text(text)) => send(socket, text).await?,
                Some(Outgoing::Disconnect(text)) => {
                    send(socket, text).await?;
                    close_at = Some(Instant::now() + DISCONNECT_GRACE);
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_) | Ok(Message::Close(_))) => return Ok(()),
                Some(Ok(Message::Text(text))) => receive(shared, text.as_str()),
                Some(Ok(Message::Binary(bytes))) => {
                    receive(shared, &String::from_utf8_lossy(&bytes));
                }
                Some(Ok(_)) => {}
            },
            () = closing => {
                let frame = CloseFrame { code: 1000, reason: "disconnect".into() };
                let _ = socket.send(Message::Close(Some(frame))).await;
                return Ok(());
            }
            () = shared.stop.cancelled() => return Ok(()),
        }
    }
}

/// Records a client frame; an acknowledgement takes its envelope off the pending list.
fn receive(shared: &Shared, text: &str) {
    let frame = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::from(text));
    {
        let mut state = shared.lock();
        state.received.push(frame.clone());
        if let Some(id) = frame.get("envelope_id").and_then(Value::as_str) {
            state.ack(id, frame.get("payload").cloned());
        }
    }
    shared.touch();
}
