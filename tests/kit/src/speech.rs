//! [`FakeSpeech`]: a fake OpenAI-compatible text-to-speech endpoint on 127.0.0.1 for voice
//! replies. `POST /v1/audio/speech` with a JSON body answers [`FakeSpeech::AUDIO`] as
//! `audio/ogg` (or, after [`FakeSpeech::fail_with`], that status and a JSON error); every
//! request is recorded with its body and `Authorization` header.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// One request the endpoint received.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechRequest {
    /// The JSON body (`Value::Null` when it was no JSON).
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

impl SpeechRequest {
    /// The text it asked to speak (`input`).
    pub fn input(&self) -> &str {
        self.body["input"].as_str().unwrap_or_default()
    }
}

struct Shared {
    requests: Mutex<Vec<SpeechRequest>>,
    /// 0: answer audio; else this status.
    failing: AtomicU16,
}

/// A running fake speech endpoint; dropping it stops the server.
pub struct FakeSpeech {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: watch::Sender<bool>,
}

impl FakeSpeech {
    /// What every synthesis answers: the first page of an OGG/Opus stream (`OggS`, then the
    /// `OpusHead` header).
    pub const AUDIO: &'static [u8] = b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\
        \x00\x00\x00\x00\x00\x00\x00\x00\x01\x13OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00";

    /// Starts the endpoint on `127.0.0.1:0`.
    pub async fn start() -> io::Result<FakeSpeech> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            failing: AtomicU16::new(0),
        });
        let app = axum::Router::new()
            .route("/v1/audio/speech", axum::routing::post(speak))
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = watch::channel(false);
        drop(crate::serve::spawn(listener, app, stopped));
        Ok(FakeSpeech {
            addr,
            shared,
            _stop: stop,
        })
    }

    /// The base URL to configure (`[tts] url`): `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// From now on every request is answered `status` (e.g. 500) with a JSON error; `None`
    /// answers audio again.
    pub fn fail_with(&self, status: Option<u16>) {
        self.shared
            .failing
            .store(status.unwrap_or(0), Ordering::SeqCst);
    }

    /// Every request so far, in order (failed ones too).
    pub fn requests(&self) -> Vec<SpeechRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn speak(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = SpeechRequest {
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    let has_input = request.body["input"]
        .as_str()
        .is_some_and(|i| !i.is_empty());
    shared
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    let failing = shared.failing.load(Ordering::SeqCst);
    if failing != 0 {
        let status = StatusCode::from_u16(failing).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let error = json!({"error": {"message": "fake speech failure", "type": "server_error"}});
        return (status, axum::Json(error)).into_response();
    }
    if !has_input {
        let error =
            json!({"error": {"message": "input is required", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    }
    (
        [(header::CONTENT_TYPE, "audio/ogg")],
        FakeSpeech::AUDIO.to_vec(),
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_answers_audio_records_requests_and_fails_when_told() {
        let speech = FakeSpeech::start().await.unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/audio/speech", speech.base_url());
        let body =
            json!({"model": "m", "voice": "alloy", "input": "hi", "response_format": "opus"});
        let answer = client
            .post(&url)
            .bearer_auth("k")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.bytes().await.unwrap().as_ref(), FakeSpeech::AUDIO);
        speech.fail_with(Some(500));
        let answer = client.post(&url).json(&body).send().await.unwrap();
        assert_eq!(answer.status(), 500);
        let requests = speech.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].input(), "hi");
        assert_eq!(requests[0].authorization.as_deref(), Some("Bearer k"));
        assert_eq!(requests[1].authorization, None);
    }
}
