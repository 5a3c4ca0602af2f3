//! The gateway: a WebSocket at `/gateway` speaking Discord's JSON protocol (text frames, no
//! compression). HELLO on connect, IDENTIFY starts a session of its shard (READY,
//! GUILD_CREATE of the shard's guilds), heartbeats
//! are acked, RESUME replays what the session dispatched after the client's `seq` and ends
//! with RESUMED, and tests can drop, close, invalidate or ask to reconnect.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::json::TOKEN;
use super::state::{Kick, Shared};

/// Privileged intents not enabled for the fake bot unless a test allows them
/// (`GUILD_MEMBERS`, `GUILD_PRESENCES`); IDENTIFY with them is closed with 4014.
const DISALLOWED_INTENTS: u64 = (1 << 1) | (1 << 8);

/// `GET /gateway` with an upgrade: hands the socket to a connection task.
pub(crate) async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve(socket, shared))
}

/// The connection ended (the socket is dropped by the caller).
#[derive(Debug)]
struct Ended;

/// One gateway connection.
struct Connection {
    conn: u64,
    shared: Arc<Shared>,
    /// The session this connection identified or resumed, if any.
    session: Option<String>,
    /// The last sequence number sent.
    cursor: u64,
}

async fn serve(mut socket: WebSocket, shared: Arc<Shared>) {
    let conn = shared.lock().open_connection();
    shared.touch();
    let mut connection = Connection {
        conn,
        shared: Arc::clone(&shared),
        session: None,
        cursor: 0,
    };
    let _ = connection.run(&mut socket).await;
    shared.lock().close_connection(conn);
    shared.touch();
    // Dropping the socket here closes the TCP connection; a close frame was sent only when
    // asked for (`Kick::Close`) or in answer to a protocol error.
    drop(socket);
}

/// Sends `payload` as a text frame.
async fn send(socket: &mut WebSocket, payload: &Value) -> Result<(), Ended> {
    socket
        .send(Message::Text(payload.to_string().into()))
        .await
        .map_err(|_| Ended)
}

/// Sends a close frame with `code` and `reason`; the connection ends.
async fn close(socket: &mut WebSocket, code: u16, reason: &str) -> Result<(), Ended> {
    let frame = CloseFrame {
        code,
        reason: reason.to_owned().into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
    Err(Ended)
}

/// Resolves when the server stops (or its handle is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // Err: the sender is gone, which means stop as well.
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// A non-dispatch payload.
fn op(op: u64, data: Value) -> Value {
    json!({ "op": op, "d": data, "s": null, "t": null })
}

impl Connection {
    async fn run(&mut self, socket: &mut WebSocket) -> Result<(), Ended> {
        let mut wake = self.shared.gateway.subscribe();
        let mut shutdown = self.shared.shutdown.clone();
        let interval = self.shared.lock().heartbeat_interval_ms;
        send(socket, &op(10, json!({ "heartbeat_interval": interval }))).await?;
        loop {
            wake.borrow_and_update();
            let (kick, outgoing, taken_over) = self.collect();
            let raw_texts = self.shared.lock().raw_texts.clone();
            for payload in &outgoing {
                let mut text = payload.to_string();
                for (placeholder, raw) in &raw_texts {
                    text = text.replace(placeholder.as_str(), raw);
                }
                socket
                    .send(Message::Text(text.into()))
                    .await
                    .map_err(|_| Ended)?;
            }
            match kick {
                Some(Kick::Drop) => return Err(Ended),
                Some(Kick::Close(code)) => return close(socket, code, "closed by the test").await,
                Some(Kick::InvalidSession) => send(socket, &op(9, json!(false))).await?,
                Some(Kick::Reconnect) => send(socket, &op(7, Value::Null)).await?,
                None => {}
            }
            if taken_over {
                // Another connection resumed this session: Discord ends this one.
                return close(socket, 4009, "Session timed out.").await;
            }
            tokio::select! {
                incoming = socket.recv() => match incoming {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Ok(()),
                    Some(Ok(Message::Text(text))) => self.handle(socket, text.as_str()).await?,
                    Some(Ok(Message::Binary(bytes))) => match std::str::from_utf8(&bytes) {
                        Ok(text) => self.handle(socket, text).await?,
                        Err(_) => return close(socket, 4002, "Error while decoding payload.").await,
                    },
                    Some(Ok(_)) => {}
                },
                changed = wake.changed() => if changed.is_err() { return Ok(()) },
                () = stopped(&mut shutdown) => return Ok(()),
            }
        }
    }

    /// Takes this connection's kick, the dispatches it has not sent yet, and whether its
    /// session was taken over by another connection.
    fn collect(&mut self) -> (Option<Kick>, Vec<Value>, bool) {
        let mut state = self.shared.lock();
        let kick = state.kicks.remove(&self.conn);
        let mut outgoing = Vec::new();
        let mut taken_over = false;
        let session = self
            .session
            .as_ref()
            .and_then(|mine| state.sessions.values().find(|s| s.id == *mine));
        if let Some(session) = session {
            if session.conn == Some(self.conn) {
                let from = usize::try_from(self.cursor).unwrap_or(usize::MAX);
                outgoing = session
                    .log
                    .get(from..)
                    .map(<[Value]>::to_vec)
                    .unwrap_or_default();
                self.cursor = session.seq;
            } else {
                taken_over = kick.is_none();
            }
        }
        (kick, outgoing, taken_over)
    }

    /// Handles one client payload.
    async fn handle(&mut self, socket: &mut WebSocket, text: &str) -> Result<(), Ended> {
        let Ok(payload) = serde_json::from_str::<Value>(text) else {
            return close(socket, 4002, "Error while decoding payload.").await;
        };
        self.shared.lock().received.push(payload.clone());
        self.shared.touch();
        match payload.get("op").and_then(Value::as_u64) {
            Some(1) => {
                self.shared.lock().heartbeat_count += 1;
                self.shared.touch();
                send(socket, &op(11, Value::Null)).await
            }
            Some(2) => self.identify(socket, &payload["d"]).await,
            Some(6) => self.resume(socket, &payload["d"]).await,
            // Presence and voice updates, member and soundboard requests: accepted, ignored.
            Some(3 | 4 | 8 | 31) if self.session.is_some() => Ok(()),
            Some(3 | 4 | 8 | 31) => close(socket, 4003, "Not authenticated.").await,
            _ => close(socket, 4001, "Unknown opcode.").await,
        }
    }

    async fn identify(&mut self, socket: &mut WebSocket, data: &Value) -> Result<(), Ended> {
        if self.session.is_some() {
            return close(socket, 4005, "Already authenticated.").await;
        }
        if !token_ok(data) {
            return close(socket, 4004, "Authentication failed.").await;
        }
        let intents = data.get("intents").and_then(Value::as_u64).unwrap_or(0);
        let allowed = self.shared.lock().privileged_allowed;
        if !allowed && intents & DISALLOWED_INTENTS != 0 {
            return close(socket, 4014, "Disallowed intent(s).").await;
        }
        {
            let mut state = self.shared.lock();
            state.identify_count += 1;
            state.intents = Some(intents);
            let id = state.start_session(self.conn, intents, data.get("shard").cloned());
            self.session = Some(id);
            self.cursor = 0;
        }
        self.shared.touch();
        Ok(())
    }

    async fn resume(&mut self, socket: &mut WebSocket, data: &Value) -> Result<(), Ended> {
        if !token_ok(data) {
            return close(socket, 4004, "Authentication failed.").await;
        }
        let wanted = data.get("session_id").and_then(Value::as_str).unwrap_or("");
        let seq = data.get("seq").and_then(Value::as_u64).unwrap_or(0);
        let replay = {
            let mut state = self.shared.lock();
            let conn = self.conn;
            let session = state.sessions.values_mut().find(|s| s.id == wanted);
            match session {
                Some(session) if seq <= session.seq => {
                    session.conn = Some(conn);
                    let from = usize::try_from(seq).unwrap_or(usize::MAX);
                    let mut replay = session.log.get(from..).map(<[Value]>::to_vec);
                    let resumed = json!({
                        "op": 0, "t": "RESUMED", "s": session.seq,
                        "d": { "_trace": ["[\"fake-discord\"]"] },
                    });
                    if let Some(replay) = &mut replay {
                        replay.push(resumed);
                    }
                    self.session = Some(session.id.clone());
                    self.cursor = session.seq;
                    state.resume_count += 1;
                    replay
                }
                _ => None,
            }
        };
        self.shared.touch();
        match replay {
            Some(payloads) => {
                for payload in &payloads {
                    send(socket, payload).await?;
                }
                Ok(())
            }
            None => send(socket, &op(9, json!(false))).await,
        }
    }
}

/// Whether the payload's `token` is the fake's, with or without the `Bot ` prefix.
fn token_ok(data: &Value) -> bool {
    let token = data.get("token").and_then(Value::as_str).unwrap_or("");
    token.strip_prefix("Bot ").unwrap_or(token) == TOKEN
}
