//! One configured server kept running: started, its tools listed, watched, started again
//! with backoff after it died (its tools answer "unavailable" meanwhile), and its calls.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connect::{Connection, connect};
use super::{McpReply, RemoteTool};
use crate::config::McpServerConfig;
use crate::sandbox::ChildSandbox;

/// The first wait before starting a server again.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two starts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Up this long, a server that dies starts again after the first wait.
const STABLE: Duration = Duration::from_secs(60);
/// Calls timed out in a row after which a server counts as stuck and is started again.
const STUCK_AFTER: u32 = 3;

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Its first start is under way.
    Starting,
    /// Connected, its tools listed.
    Ready,
    /// Down, with why; it is started again after a wait.
    Unavailable(String),
}

/// Why a call of a server's tool gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server is down (or not started yet).
    #[error("the MCP server {server} is unavailable ({why}); try again later")]
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        why: String,
    },
    /// The call took longer than its limit and was cancelled.
    #[error("the call took longer than {} s and was cancelled", .0.as_secs())]
    TimedOut(Duration),
    /// The run was stopped during the call (which was cancelled).
    #[error("the run was stopped; the call was cancelled")]
    Cancelled,
    /// The arguments are not a JSON object.
    #[error("the arguments must be a JSON object")]
    BadArguments,
    /// The server answered with a protocol error.
    #[error("the MCP server refused the call: {0}")]
    Refused(String),
}

/// What every server's supervision shares.
pub(crate) struct Supervision {
    /// How stdio servers are confined.
    pub(crate) sandbox: ChildSandbox,
    /// The folder stdio servers start in.
    pub(crate) cwd: PathBuf,
    /// How long one start (handshake and tool list) may take.
    pub(crate) attempt_timeout: Duration,
    /// The gateway's shutdown.
    pub(crate) shutdown: CancellationToken,
}

struct Shared {
    state: ServerState,
    tools: Vec<RemoteTool>,
    /// The live connection's peer, and what a call cancels when it finds the connection
    /// broken (one per connection, so a late report cannot end the next one).
    peer: Option<(Peer<RoleClient>, CancellationToken)>,
    restarts: u32,
}

/// One server and what is known of it.
pub(crate) struct Server {
    /// Its name (`[mcp.servers.NAME]`).
    pub(crate) name: String,
    /// Its settings.
    pub(crate) config: McpServerConfig,
    shared: Mutex<Shared>,
    /// Calls timed out in a row.
    timeouts: std::sync::atomic::AtomicU32,
    /// Becomes true once its first start ended, either way.
    first: watch::Sender<bool>,
}

impl Server {
    /// Server `name`, not started.
    pub(crate) fn new(name: &str, config: &McpServerConfig) -> Server {
        Server {
            name: name.to_owned(),
            config: config.clone(),
            shared: Mutex::new(Shared {
                state: ServerState::Starting,
                tools: Vec::new(),
                peer: None,
                restarts: 0,
            }),
            timeouts: std::sync::atomic::AtomicU32::new(0),
            first: watch::Sender::new(false),
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its state, its tools (the last listed, kept while it is down) and how often it was
    /// started again.
    pub(crate) fn snapshot(&self) -> (ServerState, Vec<RemoteTool>, u32) {
        let shared = self.shared();
        (shared.state.clone(), shared.tools.clone(), shared.restarts)
    }

    /// Waits until its first start ended or `deadline` passed.
    pub(crate) async fn first_start(&self, deadline: Instant) {
        let mut first = self.first.subscribe();
        let _ = tokio::time::timeout_at(deadline, first.wait_for(|done| *done)).await;
    }

    /// Keeps it running until shutdown: start, serve, and after it ends, wait (1 s doubling
    /// to 60 s; back to 1 s after a minute up) and start again.
    pub(crate) async fn supervise(self: Arc<Self>, how: Arc<Supervision>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let up = self.run_once(&how).await;
            if how.shutdown.is_cancelled() {
                return;
            }
            if up >= STABLE {
                backoff = FIRST_BACKOFF;
            }
            self.shared().restarts += 1;
            tracing::warn!(server = %self.name, "MCP server down; starting it again in {} s", backoff.as_secs());
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = how.shutdown.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One start and its life; returns how long it was up.
    async fn run_once(&self, how: &Supervision) -> Duration {
        let attempt = async {
            let connection = connect(&self.name, &self.config, &how.sandbox, &how.cwd)
                .await
                .map_err(|e| super::short(&e.to_string()))?;
            let tools = super::listing::tools_of(&self.name, connection.service.peer()).await?;
            Ok::<_, String>((connection, tools))
        };
        let started = tokio::select! {
            started = tokio::time::timeout(how.attempt_timeout, attempt) => started,
            () = how.shutdown.cancelled() => return Duration::ZERO,
        };
        let (connection, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(why)) => return self.down(why),
            Err(_) => {
                let secs = how.attempt_timeout.as_secs();
                return self.down(format!("it did not start within {secs} s"));
            }
        };
        let broken = self.up(connection.service.peer().clone(), tools);
        let since = Instant::now();
        let Connection { service, group } = connection;
        let why = tokio::select! {
            _ = service.waiting() => "it exited or closed the connection",
            () = broken.cancelled() => "its connection failed",
            () = how.shutdown.cancelled() => "chela is shutting down",
        };
        drop(group);
        self.down(why.to_owned());
        since.elapsed()
    }

    /// Notes it ready with `tools`; returns what a call cancels when it finds the connection
    /// broken.
    fn up(&self, peer: Peer<RoleClient>, tools: Vec<RemoteTool>) -> CancellationToken {
        tracing::info!(server = %self.name, tools = tools.len(), "MCP server ready");
        let mut shared = self.shared();
        shared.state = ServerState::Ready;
        shared.tools = tools;
        let broken = CancellationToken::new();
        shared.peer = Some((peer, broken.clone()));
        drop(shared);
        self.first.send_replace(true);
        broken
    }

    fn down(&self, why: String) -> Duration {
        tracing::warn!(server = %self.name, "MCP server unavailable: {why}");
        let mut shared = self.shared();
        shared.state = ServerState::Unavailable(why);
        shared.peer = None;
        drop(shared);
        self.first.send_replace(true);
        Duration::ZERO
    }

    /// Calls its tool `tool` (the server's own name) with `args`, for at most `limit`; a
    /// timeout or `cancel` cancels the call on the server.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Value,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<McpReply, CallError> {
        let (peer, broken) = self.peer()?;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            _ => return Err(CallError::BadArguments),
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let called = tokio::select! {
            called = tokio::time::timeout(limit, peer.call_tool(params)) => called,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let timeouts = match called {
            Err(_) => self.timeouts.fetch_add(1, Ordering::Relaxed) + 1,
            Ok(_) => {
                self.timeouts.store(0, Ordering::Relaxed);
                0
            }
        };
        if timeouts >= STUCK_AFTER {
            tracing::warn!(server = %self.name, "{timeouts} calls in a row timed out: starting it again");
            self.timeouts.store(0, Ordering::Relaxed);
            broken.cancel();
        }
        match called {
            Err(_) => Err(CallError::TimedOut(limit)),
            Ok(Ok(result)) => Ok(McpReply::of(&result)),
            Ok(Err(ServiceError::McpError(e))) => Err(CallError::Refused(super::short(&e.message))),
            Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                broken.cancel();
                Err(CallError::Unavailable {
                    server: self.name.clone(),
                    why: super::short(&e.to_string()),
                })
            }
            Ok(Err(e)) => Err(CallError::Refused(super::short(&e.to_string()))),
        }
    }

    fn peer(&self) -> Result<(Peer<RoleClient>, CancellationToken), CallError> {
        let shared = self.shared();
        match (&shared.peer, &shared.state) {
            // A call that found the connection broken cancelled `broken`: the worker may not
            // have ended yet, but no later call goes through it.
            (Some((peer, broken)), _) if !peer.is_transport_closed() && !broken.is_cancelled() => {
                Ok((peer.clone(), broken.clone()))
            }
            (_, ServerState::Unavailable(why)) => Err(CallError::Unavailable {
                server: self.name.clone(),
                why: why.clone(),
            }),
            (Some(_), _) => Err(CallError::Unavailable {
                server: self.name.clone(),
                why: "its connection failed".to_owned(),
            }),
            (None, _) => Err(CallError::Unavailable {
                server: self.name.clone(),
                why: "it is starting".to_owned(),
            }),
        }
    }
}
