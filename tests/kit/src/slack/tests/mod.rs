//! Tests of the fake Slack over real sockets: a reqwest Web API client and a
//! tokio-tungstenite Socket Mode client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod directory;
mod files;
mod history;
mod socket;
mod threads;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use super::{ChannelSpec, FakeSlack, UserSpec};

/// How long a test waits for something that should happen.
const WAIT: Duration = Duration::from_secs(5);

/// A Web API client.
struct Api {
    http: reqwest::Client,
    url: String,
}

impl Api {
    fn new(slack: &FakeSlack) -> Api {
        Api {
            http: reqwest::Client::new(),
            url: slack.api_url(),
        }
    }

    /// POSTs `body` as JSON to `method` with `token`: status, headers and the JSON answer.
    async fn raw(
        &self,
        method: &str,
        token: Option<&str>,
        body: &Value,
    ) -> (StatusCode, HeaderMap, Value) {
        let mut request = self.http.post(format!("{}/{method}", self.url)).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        (status, headers, response.json().await.unwrap())
    }

    /// POSTs `body` as JSON to `method` with the bot token.
    async fn call(&self, method: &str, body: Value) -> Value {
        self.raw(method, Some(FakeSlack::BOT_TOKEN), &body).await.2
    }

    /// Like [`Api::call`], asserting `ok: true`.
    async fn ok(&self, method: &str, body: Value) -> Value {
        let answer = self.call(method, body).await;
        assert_eq!(answer["ok"], true, "{method}: {answer}");
        answer
    }

    /// The `error` of a call that must fail.
    async fn error(&self, method: &str, body: Value) -> String {
        let answer = self.call(method, body).await;
        assert_eq!(answer["ok"], false, "{method}: {answer}");
        answer["error"].as_str().unwrap().to_owned()
    }

    /// POSTs `pairs` form-encoded to `method` with the bot token.
    async fn form(&self, method: &str, pairs: &[(&str, &str)]) -> Value {
        let body: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", super::json::path_segment(v)))
            .collect();
        self.http
            .post(format!("{}/{method}", self.url))
            .bearer_auth(FakeSlack::BOT_TOKEN)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// GETs `method?query` with the bot token.
    async fn get(&self, method: &str, query: &str) -> Value {
        self.http
            .get(format!("{}/{method}?{query}", self.url))
            .bearer_auth(FakeSlack::BOT_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// What a Socket Mode client saw next.
#[derive(Debug)]
enum Seen {
    Frame(Value),
    Closed,
    Reset,
}

/// A Socket Mode client.
struct Socket {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Socket {
    /// Opens a connection as a client does (`apps.connections.open` with the app token);
    /// returns it and the `hello`.
    async fn connect(slack: &FakeSlack) -> (Socket, Value) {
        let api = Api::new(slack);
        let (_, _, answer) = api
            .raw(
                "apps.connections.open",
                Some(FakeSlack::APP_TOKEN),
                &json!({}),
            )
            .await;
        let url = answer["url"].as_str().unwrap().to_owned();
        let (ws, _) = connect_async(url).await.unwrap();
        let mut socket = Socket { ws };
        let hello = socket.recv().await;
        (socket, hello)
    }

    async fn next_within(&mut self, wait: Duration) -> Option<Seen> {
        loop {
            let item = tokio::time::timeout(wait, self.ws.next()).await.ok()?;
            return Some(match item {
                Some(Ok(Message::Text(text))) => Seen::Frame(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(_))) => Seen::Closed,
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => Seen::Reset,
            });
        }
    }

    /// The next frame (within [`WAIT`]).
    async fn recv(&mut self) -> Value {
        match self.next_within(WAIT).await {
            Some(Seen::Frame(frame)) => frame,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Asserts nothing arrives within `wait`.
    async fn silent_for(&mut self, wait: Duration) {
        if let Some(seen) = self.next_within(wait).await {
            panic!("expected silence, got {seen:?}");
        }
    }

    /// Acknowledges `envelope`, with `payload` if given.
    async fn ack(&mut self, envelope: &Value, payload: Option<Value>) {
        let mut ack = json!({ "envelope_id": envelope["envelope_id"] });
        if let Some(payload) = payload {
            ack["payload"] = payload;
        }
        self.ws.send(Message::Text(ack.to_string())).await.unwrap();
    }
}

fn ann() -> UserSpec {
    UserSpec::new("U1", "ann")
}

fn general() -> ChannelSpec {
    ChannelSpec::public("C1", "general")
}
