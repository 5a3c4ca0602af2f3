//! [`QuickModel`]: a minimal OpenAI chat-completions server on raw tokio sockets, for telling
//! the gateway's own cost apart from the transport's.
//!
//! It answers every `POST .../chat/completions` the way `chela_testkit::FakeModel` answers a
//! plain message (`ok: <last user text>`, one SSE event per word, chunked transfer, keep-alive),
//! writing each event with its own `write_all` as axum does. `nodelay` chooses whether the
//! accepted sockets set `TCP_NODELAY`: with it off, small writes after the first wait for the
//! peer's delayed ACK (Nagle), which is what the bench shows about the fake model.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::BenchResult;

/// A running quick model server; stops when dropped.
pub struct QuickModel {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    task: JoinHandle<()>,
}

impl QuickModel {
    /// Starts a server on 127.0.0.1:0; `nodelay` sets `TCP_NODELAY` on accepted sockets.
    pub async fn start(nodelay: bool) -> BenchResult<QuickModel> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let shared = bodies.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                if nodelay {
                    let _ = socket.set_nodelay(true);
                }
                tokio::spawn(serve(socket, shared.clone()));
            }
        });
        Ok(QuickModel { addr, bodies, task })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bodies received so far, in order (kept as raw bytes, parsed here, so the
    /// server's own memory stays small next to the gateway's).
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or(Value::Null))
            .collect()
    }
}

impl Drop for QuickModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves one keep-alive connection until the client closes it or sends garbage.
async fn serve(socket: TcpStream, bodies: Arc<Mutex<Vec<Vec<u8>>>>) {
    let mut stream = BufReader::new(socket);
    loop {
        let mut content_length = 0usize;
        let mut request_line = String::new();
        match stream.read_line(&mut request_line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            let mut header = String::new();
            match stream.read_line(&mut header).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.trim().eq_ignore_ascii_case("content-length")
            {
                content_length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; content_length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = format!("ok: {}", last_user_text(&json));
        let usage = json["stream_options"]["include_usage"]
            .as_bool()
            .unwrap_or(false);
        drop(json);
        bodies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(body);
        if respond(stream.get_mut(), &answer, usage).await.is_err() {
            return;
        }
    }
}

/// Writes the SSE answer, one chunked write per event.
async fn respond(socket: &mut TcpStream, answer: &str, usage: bool) -> std::io::Result<()> {
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
              cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await?;
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": "chatcmpl-quick",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "quick",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        })
    };
    let mut events = vec![chunk(json!({ "role": "assistant" }), None)];
    for word in answer.split_inclusive(' ') {
        events.push(chunk(json!({ "content": word }), None));
    }
    events.push(chunk(json!({}), Some("stop")));
    if usage {
        events.push(json!({
            "id": "chatcmpl-quick",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "quick",
            "choices": [],
            "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
        }));
    }
    for event in events {
        write_chunk(socket, &format!("data: {event}\n\n")).await?;
    }
    write_chunk(socket, "data: [DONE]\n\n").await?;
    socket.write_all(b"0\r\n\r\n").await
}

async fn write_chunk(socket: &mut TcpStream, data: &str) -> std::io::Result<()> {
    socket
        .write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
        .await
}

/// The text of the last user message (string content or text parts).
fn last_user_text(body: &Value) -> String {
    let Some(messages) = body["messages"].as_array() else {
        return String::new();
    };
    messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .unwrap_or_default()
}
