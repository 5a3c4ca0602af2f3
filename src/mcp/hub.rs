//! Every configured MCP server of one gateway: started in the background when the gateway
//! starts (the gateway never waits for them), their tools, their calls, their state.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::server::{Server, Supervision};
use super::{CallError, McpReply, RemoteTool, ServerState};
use crate::config::{Config, ExecApprovals};
use crate::sandbox::ChildSandbox;

/// How long one start may take at least, whatever `startup_timeout_s` says (a package
/// runner such as `npx` may download the server first).
const MIN_ATTEMPT: Duration = Duration::from_secs(60);

/// One server as `chela doctor`, the panel and `/status` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// `stdio: <command>` or `http: <url>`.
    pub transport: String,
    /// Where it is.
    pub state: ServerState,
    /// Its tools (the last listed).
    pub tools: Vec<RemoteTool>,
    /// How often it was started again.
    pub restarts: u32,
}

/// The gateway's MCP servers.
pub struct Hub {
    servers: Vec<Arc<Server>>,
    /// When a run stops waiting for servers still starting.
    startup_deadline: Instant,
    call_timeout: Duration,
}

impl Hub {
    /// Starts supervising every enabled server of `config` (in the background, until
    /// `shutdown`); `None` when there is none.
    pub fn start(config: &Config, shutdown: &CancellationToken) -> Option<Arc<Hub>> {
        let mcp = &config.mcp;
        let servers: Vec<Arc<Server>> = (mcp.enabled())
            .map(|(name, server)| Arc::new(Server::new(name, server)))
            .collect();
        if servers.is_empty() {
            return None;
        }
        let startup = Duration::from_secs(mcp.startup_timeout_s);
        let how = Arc::new(Supervision {
            sandbox: sandbox(config, true),
            cwd: workspace(config),
            attempt_timeout: startup.max(MIN_ATTEMPT),
            shutdown: shutdown.clone(),
        });
        for server in &servers {
            tokio::spawn(server.clone().supervise(how.clone()));
        }
        Some(Arc::new(Hub {
            servers,
            startup_deadline: Instant::now() + startup,
            call_timeout: Duration::from_secs(mcp.call_timeout_s),
        }))
    }

    /// Waits until the first start of every server of `selection` (every server when
    /// `None`) ended, or `startup_timeout_s` after the gateway started (a run offers the
    /// tools of the servers up by then).
    pub async fn settled(&self, selection: Option<&[String]>) {
        let chosen = |name: &str| selection.is_none_or(|names| names.iter().any(|n| n == name));
        let waits = (self.servers.iter())
            .filter(|s| chosen(&s.name))
            .map(|s| s.first_start(self.startup_deadline));
        futures_util::future::join_all(waits).await;
    }

    /// The tools of the servers `selection` names (every server when `None`), from each
    /// server's last listing: a server that is down keeps its tools offered, and they
    /// answer that it is unavailable.
    pub fn tools(&self, selection: Option<&[String]>) -> Vec<RemoteTool> {
        let chosen = |name: &str| selection.is_none_or(|names| names.iter().any(|n| n == name));
        (self.servers.iter())
            .filter(|server| chosen(&server.name))
            .flat_map(|server| server.snapshot().1)
            .collect()
    }

    /// Whether calls of server `server`'s tools need an owner's approval.
    pub fn approvals(&self, server: &str) -> ExecApprovals {
        (self.servers.iter())
            .find(|s| s.name == server)
            .map_or(ExecApprovals::Ask, |s| s.config.approvals)
    }

    /// Calls `tool` with `args`; cancelled on the server after `[mcp] call_timeout_s` or
    /// when `cancel` fires.
    pub async fn call(
        &self,
        tool: &RemoteTool,
        args: Value,
        cancel: &CancellationToken,
    ) -> Result<McpReply, CallError> {
        let Some(server) = self.servers.iter().find(|s| s.name == tool.server) else {
            return Err(CallError::Unavailable {
                server: tool.server.clone(),
                why: "it is not configured".to_owned(),
            });
        };
        server
            .call(&tool.name, args, self.call_timeout, cancel)
            .await
    }

    /// Every server's state.
    pub fn status(&self) -> Vec<ServerStatus> {
        (self.servers.iter())
            .map(|server| {
                let (state, tools, restarts) = server.snapshot();
                ServerStatus {
                    name: server.name.clone(),
                    transport: transport_of(&server.config),
                    state,
                    tools,
                    restarts,
                }
            })
            .collect()
    }
}

/// The folder stdio servers start in: the default agent's workspace, made if missing (the
/// agent makes it only after the servers start).
fn workspace(config: &Config) -> std::path::PathBuf {
    if let Err(e) = std::fs::create_dir_all(&config.agent.workspace) {
        tracing::warn!(error = %e, "cannot create the workspace for MCP servers");
    }
    config.agent.workspace.clone()
}

/// `stdio: <command>` or `http: <url>`.
fn transport_of(server: &crate::config::McpServerConfig) -> String {
    match server.is_stdio() {
        true => format!("stdio: {}", server.command),
        false => format!(
            "http: {}",
            crate::config::redact::redact_url(&server.url, false)
        ),
    }
}

/// The sandbox of stdio servers (`[mcp] sandbox`), announced in the log when `announce`.
fn sandbox(config: &Config, announce: bool) -> ChildSandbox {
    let mcp = &config.mcp;
    let tcp = mcp.network.connect_ports(&mcp.allow_ports);
    match announce {
        true => ChildSandbox::announced(mcp.sandbox, tcp, config, "[mcp] sandbox"),
        false => ChildSandbox::from_config(mcp.sandbox, tcp, config),
    }
}

/// Starts (or reaches) server `name` of `config` once, as the gateway would, lists its
/// tools and ends it: what `chela doctor` shows. Takes at most `limit`.
pub async fn probe(
    config: &Config,
    name: &str,
    limit: Duration,
) -> Result<Vec<RemoteTool>, String> {
    let server = config
        .mcp
        .servers
        .get(name)
        .ok_or_else(|| format!("no server {name:?} in [mcp.servers]"))?;
    let sandbox = sandbox(config, false);
    let attempt = async {
        let connection = super::connect::connect(name, server, &sandbox, &workspace(config))
            .await
            .map_err(|e| e.to_string())?;
        let tools = super::listing::tools_of(name, connection.service.peer()).await;
        let _ = connection.service.cancel().await;
        drop(connection.group);
        tools
    };
    tokio::time::timeout(limit, attempt)
        .await
        .map_err(|_| format!("no answer within {} s", limit.as_secs()))?
}
