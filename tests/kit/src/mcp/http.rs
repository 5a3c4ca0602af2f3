//! [`FakeMcpHttp`]: the fake MCP server over streamable HTTP (MCP 2025-11-25 transports),
//! in-process on `127.0.0.1`, recording every request. The routes are in `http_routes.rs`.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::handler::{HandlerOptions, McpEvent, McpHandler};
use super::http_state::HttpShared;
pub use super::http_state::McpHttpRequest;
use super::http_state::lock;

/// A running fake MCP server; dropping it (or [`FakeMcpHttp::stop`]) stops it and ends
/// every call under way.
pub struct FakeMcpHttp {
    addr: SocketAddr,
    shared: Arc<HttpShared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl FakeMcpHttp {
    /// Starts a server on `127.0.0.1:0` (a free port) in a background tokio task.
    pub async fn start() -> io::Result<FakeMcpHttp> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
        let addr = listener.local_addr()?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&calls);
        let observer = Arc::new(move |event: &McpEvent| {
            if let McpEvent::Call(tool) = event {
                lock(&seen).push(tool.clone());
            }
        });
        let handler = McpHandler::new(HandlerOptions {
            observer: Some(observer),
            ..HandlerOptions::default()
        });
        let shared = Arc::new(HttpShared {
            handler,
            sessions: Mutex::new(HashSet::new()),
            requests: Mutex::new(Vec::new()),
            calls,
            down: AtomicBool::new(false),
            event_ids: AtomicU64::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let app = super::http_routes::router(Arc::clone(&shared));
        let task = crate::serve::spawn(listener, app, stopped);
        Ok(FakeMcpHttp {
            addr,
            shared,
            stop,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT/mcp`, the endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<McpHttpRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The tools called so far (`tools/call` names), in order.
    pub fn calls(&self) -> Vec<String> {
        lock(&self.shared.calls).clone()
    }

    /// The request ids of every `notifications/cancelled` received, in order.
    pub fn cancelled(&self) -> Vec<String> {
        self.shared.handler.cancelled()
    }

    /// The sessions open now (their `Mcp-Session-Id`s).
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.shared.sessions).iter().cloned().collect()
    }

    /// While down, every POST is answered 503.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// Forgets every session, as a restarted server would: later POSTs carrying one get 404.
    pub fn expire_sessions(&self) {
        lock(&self.shared.sessions).clear();
    }

    /// Stops the server: ends calls under way, stops accepting, waits for the server task.
    pub async fn stop(mut self) -> io::Result<()> {
        self.shared.handler.cancel_all();
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for FakeMcpHttp {
    fn drop(&mut self) {
        self.shared.handler.cancel_all();
        let _ = self.stop.send(true);
    }
}
