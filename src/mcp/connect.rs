//! Starting (stdio) or reaching (streamable HTTP) one server and shaking hands with it.

use std::process::Stdio;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::config::McpServerConfig;
use crate::sandbox::{ChildSandbox, ProcessGroup};

/// A live session with one server. Dropping it ends the session and, for a stdio server,
/// kills the server's whole process group.
pub(crate) struct Connection {
    /// The running client session.
    pub(crate) service: RunningService<RoleClient, ClientConfig>,
    /// A stdio server's process group.
    pub(crate) group: Option<ProcessGroup>,
}

/// Why a server could not be started or reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The program is not there (or not on `PATH`).
    #[error("cannot start {0}: no such program (a bare name is looked up on PATH)")]
    NotFound(String),
    /// The sandbox cannot run this command.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::child::ChildSandboxError),
    /// The HTTP endpoint or its headers are not usable.
    #[error(transparent)]
    Http(#[from] super::http::HttpSetupError),
    /// The server did not complete the MCP handshake.
    #[error("no MCP handshake: {0}")]
    Handshake(String),
}

/// What chela says it is, and that it asks for no client capabilities (no roots: a server
/// such as the reference filesystem one would take the client's roots over its own
/// arguments).
fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("chela", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// Starts (in folder `cwd`) or reaches server `name` and shakes hands.
pub(crate) async fn connect(
    name: &str,
    server: &McpServerConfig,
    sandbox: &ChildSandbox,
    cwd: &std::path::Path,
) -> Result<Connection, ConnectError> {
    if server.is_stdio() {
        return stdio(name, server, sandbox, cwd).await;
    }
    let target = super::http::HttpTarget {
        url: server.url.trim().to_owned(),
        headers: server.headers.clone(),
    };
    let transport = super::http::transport(&target)?;
    let service = client_info()
        .serve(transport)
        .await
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    Ok(Connection {
        service,
        group: None,
    })
}

/// Starts a stdio server in its own process group, confined as `sandbox` says, from the
/// scrubbed environment plus its `pass_env` and `env`, in `cwd`; its stderr goes to chela's
/// log.
async fn stdio(
    name: &str,
    server: &McpServerConfig,
    sandbox: &ChildSandbox,
    cwd: &std::path::Path,
) -> Result<Connection, ConnectError> {
    let program = server.command.trim();
    if !exists(program) {
        return Err(ConnectError::NotFound(program.to_owned()));
    }
    let argv: Vec<std::ffi::OsString> = std::iter::once(program)
        .chain(server.args.iter().map(String::as_str))
        .map(Into::into)
        .collect();
    let argv = sandbox.argv(&argv);
    let (program, args) = argv.split_first().ok_or_else(|| ConnectError::Spawn {
        program: server.command.clone(),
        source: std::io::Error::other("no program"),
    })?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(crate::sandbox::env::scrubbed(&server.pass_env))
        .envs(&server.env)
        .current_dir(cwd)
        .process_group(0)
        .kill_on_drop(true);
    let spawned = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn();
    let (process, stderr) = spawned.map_err(|source| ConnectError::Spawn {
        program: server.command.clone(),
        source,
    })?;
    let group = ProcessGroup::led_by(process.id());
    if let Some(stderr) = stderr {
        tokio::spawn(log_stderr(Arc::from(name), stderr));
    }
    let service = client_info()
        .serve(process)
        .await
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    Ok(Connection {
        service,
        group: Some(group),
    })
}

/// Whether `program` is a file, or a bare name found on `PATH` (under the sandbox the
/// trampoline would start and then fail to run it, which reads as a closed connection).
fn exists(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join(program).is_file())
}

/// Logs what a server writes on stderr, line by line: each line cut to [`LOG_LINE`] bytes
/// (never buffered past that), at most [`LOG_BURST`] lines a minute (the rest counted), read
/// to its end so the server never blocks on a full pipe.
async fn log_stderr(name: Arc<str>, mut stderr: tokio::process::ChildStderr) {
    let mut line: Vec<u8> = Vec::new();
    let mut pace = Pace::default();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut buf).await {
        for &byte in &buf[..n] {
            if byte == b'\n' {
                pace.log(&name, &line);
                line.clear();
            } else if line.len() < LOG_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        pace.log(&name, &line);
    }
}

/// The most bytes of one stderr line logged.
const LOG_LINE: usize = 1_000;
/// The most stderr lines of one server logged a minute.
const LOG_BURST: u32 = 60;

/// How many stderr lines were logged in the current minute, and how many were not.
#[derive(Default)]
struct Pace {
    since: Option<tokio::time::Instant>,
    logged: u32,
    dropped: u64,
}

impl Pace {
    fn log(&mut self, name: &str, line: &[u8]) {
        let now = tokio::time::Instant::now();
        if self
            .since
            .is_none_or(|since| now - since >= std::time::Duration::from_secs(60))
        {
            if self.dropped > 0 {
                tracing::info!(server = %name, "mcp server: {} more stderr lines not logged", self.dropped);
            }
            *self = Pace {
                since: Some(now),
                logged: 0,
                dropped: 0,
            };
        }
        if self.logged < LOG_BURST {
            self.logged += 1;
            let text: String = (String::from_utf8_lossy(line).chars())
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
            tracing::info!(server = %name, "mcp server: {text}");
        } else {
            self.dropped += 1;
        }
    }
}
