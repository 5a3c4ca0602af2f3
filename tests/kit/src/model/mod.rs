//! The fake model server: [`FakeModel`] serves OpenAI Chat Completions, OpenAI Responses and
//! Anthropic Messages on 127.0.0.1, answering by the directives in the last user text (see the
//! crate docs), and records every POST it receives.

mod anthropic;
mod cache;
mod conversation;
mod long;
mod openai_chat;
mod openai_responses;
mod script;
mod server;
mod stream;
mod summary;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, PoisonError};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use server::Shared;

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One POST the server received, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request path without its query, e.g. `/v1/messages` for `/v1/messages?beta=true`.
    pub path: String,
    /// The body as JSON; a body that is not JSON is kept as a JSON string of its text.
    pub body: Value,
    /// The API key it carried (`authorization: Bearer KEY` or `x-api-key: KEY`), if any.
    pub key: Option<String>,
}

/// A server-wide failure, whatever the request says (for fallbacks: the same prompt goes to
/// a second server that answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// Every model call is answered with this HTTP status (429 with `retry-after: 1`).
    Status(u16),
    /// Every model call is taken and never answered (no headers), until the client leaves.
    Silent,
}

/// A running fake model server. Dropping it (or calling [`FakeModel::shutdown`]) stops it:
/// the listener closes and open streams end.
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
}

impl FakeModel {
    /// Starts a server on `127.0.0.1:0` (a free port) in a background tokio task.
    pub async fn start() -> io::Result<FakeModel> {
        FakeModel::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await
    }

    /// Starts a server on `addr` in a background tokio task.
    pub async fn bind(addr: SocketAddr) -> io::Result<FakeModel> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared::new(stopped.clone()));
        let app = server::router(Arc::clone(&shared));
        let task = crate::serve::spawn(listener, app, stopped);
        Ok(FakeModel {
            addr,
            shared,
            stop,
            task,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the Anthropic-style base URL (no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`, the OpenAI-style base URL.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Every POST received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes every model call fail as `outage` says (`None`: answer again).
    pub fn set_outage(&self, outage: Option<Outage>) {
        *lock(&self.shared.outage) = outage;
    }

    /// Only these API keys are accepted from now on: a call with another key, or none, is
    /// answered 401.
    pub fn accept_keys(&self, keys: &[&str]) {
        lock(&self.shared.keys).accepted = Some(keys.iter().map(|k| k.to_string()).collect());
    }

    /// Calls with these API keys are answered 429 (`retry-after: 1`) from now on.
    pub fn limit_keys(&self, keys: &[&str]) {
        lock(&self.shared.keys).limited = keys.iter().map(|k| k.to_string()).collect();
    }

    /// How many POSTs were received so far.
    pub fn request_count(&self) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Stops the server: ends open streams, stops accepting, and waits for the server task.
    pub async fn shutdown(self) -> io::Result<()> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join)),
        }
    }

    /// Serves until the server task ends (it ends only on error or after [`FakeModel::shutdown`]
    /// from elsewhere, so in practice: forever). Used by the `fake-model` binary.
    pub async fn serve_forever(self) -> io::Result<()> {
        let FakeModel { task, stop, .. } = self;
        let result = task.await;
        drop(stop);
        match result {
            Ok(result) => result,
            Err(join) => Err(io::Error::other(join)),
        }
    }
}
