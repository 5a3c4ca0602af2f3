//! One ACP connection to one coding-agent process, on the official `agent-client-protocol`
//! crate (v1). The crate's handlers run one at a time per connection, so every handler here
//! hands its work to a task and returns at once: a handler that waited on the agent or on a
//! person would deadlock the connection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ClientCapabilities, CloseSessionRequest, ContentBlock,
    FileSystemCapabilities, ImageContent, Implementation, InitializeRequest, LoadSessionRequest,
    NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, SessionId,
    SessionNotification, SessionUpdate, StopReason, TextContent, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use tokio_util::sync::CancellationToken;

use super::AcpError;
use super::fs::FsError;
use super::permission::{self, Decision};
use super::process::{AgentProcess, Exit};
use super::terminal::{TermError, TermExit, Terminals};
use crate::config::{HarnessConfig, NonInteractive, PermissionMode};

/// How long `initialize`, `session/new` and `session/load` may take (agents start slowly:
/// `npx` may fetch a package first).
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an agent has to answer `cancelled` after `session/cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// Updates buffered between the connection and the turn that consumes them.
const UPDATE_BUFFER: usize = 256;

/// Asks a person to answer a permission request (mode `ask`).
pub trait Asker: Send + Sync {
    /// Shows `request` and waits for an answer; `None` when nobody answered in time.
    fn ask(
        &self,
        request: RequestPermissionRequest,
    ) -> crate::agent::provider::BoxFuture<'static, Option<Decision>>;
}

/// What the client side offers the agent.
#[derive(Clone)]
pub struct Services {
    /// How permission requests are answered.
    pub permissions: PermissionMode,
    /// Who answers in `ask` mode; `None`: nobody can be asked, so deny.
    pub asker: Option<Arc<dyn Asker>>,
    /// Most bytes of output one terminal keeps.
    pub terminal_output_limit: usize,
    /// What `ask` does when there is no asker: deny, or fail (cancel) the turn.
    pub non_interactive: NonInteractive,
    /// How the agent process and its terminal commands are confined.
    pub sandbox: Arc<crate::sandbox::ChildSandbox>,
    /// chela's own files (store folder, RPC token file, config file), which the file service
    /// refuses whatever the sandbox (see [`crate::sandbox::child::hidden`]).
    pub hidden: Arc<[PathBuf]>,
    /// The MCP servers its sessions get ([`super::mcp_servers`]), as the agent takes them.
    pub mcp_servers: Arc<[agent_client_protocol::v1::schema::McpServer]>,
}

/// State the connection's handlers share.
struct Shared {
    /// Where each session's updates go while a turn consumes them.
    routes: Mutex<HashMap<String, mpsc::Sender<SessionUpdate>>>,
    /// The folder each session's file access is confined to.
    roots: Mutex<HashMap<String, PathBuf>>,
    terminals: Terminals,
    services: Services,
    /// Permission requests nobody could be asked about (mode `ask` without an asker).
    unasked: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn route(&self, session: &str) -> Option<mpsc::Sender<SessionUpdate>> {
        self.routes.lock().ok()?.get(session).cloned()
    }

    fn root(&self, session: &str) -> Option<PathBuf> {
        self.roots.lock().ok()?.get(session).cloned()
    }
}

/// How a prompt turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// The agent answered the prompt with this stop reason.
    Stopped(StopReason),
    /// The agent closed the connection cleanly without answering (the turn still completes).
    Closed,
}

/// A live connection to one agent process.
pub struct AcpClient {
    harness: String,
    cx: ConnectionTo<Agent>,
    process: AgentProcess,
    capabilities: AgentCapabilities,
    agent_name: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl AcpClient {
    /// Starts `harness` in `cwd` and initializes the connection.
    pub async fn start(
        name: &str,
        harness: &HarnessConfig,
        cwd: &Path,
        services: Services,
    ) -> Result<AcpClient, AcpError> {
        let (process, pipes) =
            AgentProcess::spawn(name, &harness.command, &harness.env, cwd, &services.sandbox)?;
        let shared = Arc::new(Shared {
            routes: Mutex::new(HashMap::new()),
            roots: Mutex::new(HashMap::new()),
            terminals: Terminals::new(services.terminal_output_limit)
                .confined_by(services.sandbox.clone()),
            services,
            unasked: std::sync::atomic::AtomicUsize::new(0),
        });
        let stop = CancellationToken::new();
        let (cx_tx, cx_rx) = oneshot::channel();
        let transport = ByteStreams::new(pipes.stdin.compat_write(), pipes.stdout.compat());
        let driver = connection(shared.clone()).connect_with(transport, {
            let stop = stop.clone();
            async move |cx: ConnectionTo<Agent>| {
                let _ = cx_tx.send(cx.clone());
                stop.cancelled().await;
                Ok(())
            }
        });
        let harness_name = name.to_owned();
        tokio::spawn(async move {
            if let Err(e) = driver.await {
                tracing::debug!(harness = %harness_name, error = %e, "ACP connection ended");
            }
        });
        let cx = cx_rx.await.map_err(|_| AcpError::Protocol {
            harness: name.to_owned(),
            reason: "the connection ended before it started".to_owned(),
        })?;
        let mut client = AcpClient {
            harness: name.to_owned(),
            cx,
            process,
            capabilities: AgentCapabilities::default(),
            agent_name: name.to_owned(),
            shared,
            stop,
        };
        let request = InitializeRequest::new(agent_client_protocol::schema::ProtocolVersion::V1)
            .client_capabilities(
                ClientCapabilities::new()
                    .fs(FileSystemCapabilities::new()
                        .read_text_file(true)
                        .write_text_file(true))
                    .terminal(true),
            )
            .client_info(Implementation::new("chela", env!("CARGO_PKG_VERSION")));
        let init = client
            .setup(client.cx.send_request(request).block_task())
            .await?;
        client.capabilities = init.agent_capabilities;
        if let Some(info) = init.agent_info {
            client.agent_name = format!("{} {}", info.name, info.version);
        }
        Ok(client)
    }

    /// The harness name this process runs.
    pub fn harness(&self) -> &str {
        &self.harness
    }

    /// The agent's own name and version, as it told in `initialize`.
    pub fn agent_name(&self) -> &str {
        &self.agent_name
    }

    /// Whether the agent takes `image` content blocks (`promptCapabilities.image`).
    pub fn accepts_images(&self) -> bool {
        self.capabilities.prompt_capabilities.image
    }

    /// Whether the agent can resume sessions with `session/load`.
    pub fn can_load(&self) -> bool {
        self.capabilities.load_session
    }

    /// How many permission requests nobody could be asked about so far.
    pub fn unasked(&self) -> usize {
        self.shared
            .unasked
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The process id of the agent (its process group).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// True while the agent process runs.
    pub fn is_alive(&self) -> bool {
        self.process.exit_status().is_none()
    }

    /// The MCP servers a session of this agent gets: those configured for coding agents that
    /// it takes (`mcpCapabilities`).
    fn mcp_servers(&self) -> Vec<agent_client_protocol::v1::schema::McpServer> {
        super::mcp_servers::offered(
            &self.shared.services.mcp_servers,
            &self.capabilities.mcp_capabilities,
        )
    }

    /// Starts a new session in `cwd`; returns its id.
    pub async fn new_session(&self, cwd: &Path) -> Result<String, AcpError> {
        let response = self
            .setup(
                self.cx
                    .send_request(
                        NewSessionRequest::new(cwd.to_path_buf()).mcp_servers(self.mcp_servers()),
                    )
                    .block_task(),
            )
            .await?;
        let id = response.session_id.0.to_string();
        self.set_root(&id, cwd);
        Ok(id)
    }

    /// Resumes session `id` in `cwd` with `session/load` (its replayed history is dropped).
    pub async fn load_session(&self, id: &str, cwd: &Path) -> Result<(), AcpError> {
        if !self.can_load() {
            return Err(AcpError::Unsupported {
                harness: self.harness.clone(),
                what: "session/load",
            });
        }
        self.set_root(id, cwd);
        let request = LoadSessionRequest::new(SessionId::new(id), cwd.to_path_buf())
            .mcp_servers(self.mcp_servers());
        self.setup(self.cx.send_request(request).block_task())
            .await?;
        Ok(())
    }

    /// Sends `text` to session `id` and forwards its updates to `updates` until the agent
    /// answers. `cancel` sends `session/cancel` and waits (a while) for the `cancelled` answer.
    pub async fn prompt(
        &self,
        id: &str,
        text: &str,
        updates: mpsc::Sender<SessionUpdate>,
        cancel: &CancellationToken,
    ) -> Result<TurnEnd, AcpError> {
        let prompt = super::media::Prompt::text(text);
        self.prompt_with(id, &prompt, updates, cancel).await
    }

    /// [`AcpClient::prompt`] of `prompt`: a text block, then its image blocks.
    pub async fn prompt_with(
        &self,
        id: &str,
        prompt: &super::media::Prompt,
        updates: mpsc::Sender<SessionUpdate>,
        cancel: &CancellationToken,
    ) -> Result<TurnEnd, AcpError> {
        let (tx, mut rx) = mpsc::channel(UPDATE_BUFFER);
        if let Ok(mut routes) = self.shared.routes.lock() {
            routes.insert(id.to_owned(), tx);
        }
        let mut blocks = vec![ContentBlock::Text(TextContent::new(prompt.text.clone()))];
        blocks.extend(prompt.images.iter().map(|image| {
            ContentBlock::Image(ImageContent::new(
                image.data.clone(),
                image.mime_type.clone(),
            ))
        }));
        let request = PromptRequest::new(SessionId::new(id), blocks);
        let answer = self.cx.send_request(request).block_task();
        tokio::pin!(answer);
        let mut cancel_deadline: Option<tokio::time::Instant> = None;
        let result = loop {
            tokio::select! {
                biased;
                Some(update) = rx.recv() => {
                    let _ = updates.send(update).await;
                }
                result = &mut answer => break Some(result),
                _ = cancel.cancelled(), if cancel_deadline.is_none() => {
                    let _ = self.cx.send_notification(CancelNotification::new(SessionId::new(id)));
                    cancel_deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                }
                _ = sleep_until(cancel_deadline), if cancel_deadline.is_some() => break None,
            }
        };
        if let Ok(mut routes) = self.shared.routes.lock() {
            routes.remove(id);
        }
        while let Ok(update) = rx.try_recv() {
            let _ = updates.send(update).await;
        }
        match result {
            Some(Ok(response)) => Ok(TurnEnd::Stopped(response.stop_reason)),
            Some(Err(e)) => match self.process.exited_within(Duration::from_secs(2)).await {
                Some(Exit::Code(0)) => Ok(TurnEnd::Closed),
                Some(exit) => Err(AcpError::Crashed {
                    harness: self.harness.clone(),
                    exit: exit.to_string(),
                }),
                None => Err(AcpError::Protocol {
                    harness: self.harness.clone(),
                    reason: e.to_string(),
                }),
            },
            None => Err(AcpError::CancelTimeout {
                harness: self.harness.clone(),
            }),
        }
    }

    /// Closes session `id` (`session/close` when offered; the process stays up).
    pub async fn close_session(&self, id: &str) {
        if self.capabilities.session_capabilities.close.is_some() {
            let request = CloseSessionRequest::new(SessionId::new(id));
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                self.cx.send_request(request).block_task(),
            )
            .await;
        }
        if let Ok(mut roots) = self.shared.roots.lock() {
            roots.remove(id);
        }
    }

    /// Ends the connection and the agent's whole process group.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        if self
            .process
            .exited_within(Duration::from_millis(300))
            .await
            .is_none()
        {
            self.process.terminate().await;
        }
    }

    fn set_root(&self, id: &str, cwd: &Path) {
        if let Ok(mut roots) = self.shared.roots.lock() {
            roots.insert(id.to_owned(), cwd.to_path_buf());
        }
    }

    /// Awaits a setup request with a timeout, turning failures into [`AcpError`].
    async fn setup<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, agent_client_protocol::Error>>,
    ) -> Result<T, AcpError> {
        tokio::select! {
            result = tokio::time::timeout(SETUP_TIMEOUT, request) => match result {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(e)) => Err(self.failure(e).await),
                Err(_) => Err(AcpError::Protocol {
                    harness: self.harness.clone(),
                    reason: format!("no answer within {} s", SETUP_TIMEOUT.as_secs()),
                }),
            },
            exit = self.process.exited() => Err(AcpError::Crashed {
                harness: self.harness.clone(),
                exit: exit.to_string(),
            }),
        }
    }

    async fn failure(&self, e: agent_client_protocol::Error) -> AcpError {
        match self.process.exited_within(Duration::from_millis(500)).await {
            Some(exit) => AcpError::Crashed {
                harness: self.harness.clone(),
                exit: exit.to_string(),
            },
            None => AcpError::Protocol {
                harness: self.harness.clone(),
                reason: e.to_string(),
            },
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The client side of the connection: its handlers.
fn connection(
    shared: Arc<Shared>,
) -> agent_client_protocol::Builder<
    Client,
    impl agent_client_protocol::HandleDispatchFrom<Agent> + 'static,
    impl agent_client_protocol::RunWithConnectionTo<Agent> + 'static,
    impl agent_client_protocol::HandleConnectionClose<Agent> + 'static,
    agent_client_protocol::V1,
> {
    let on_update = shared.clone();
    let on_permission = shared.clone();
    let on_read = shared.clone();
    let on_write = shared.clone();
    let terminals = shared;
    Client
        .v1()
        .name("chela")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                // Awaiting the turn's bounded buffer is back-pressure, not a deadlock: the
                // consumer never waits on this connection.
                if let Some(route) = on_update.route(&notification.session_id.0) {
                    let update = permission::without_refusal_marks(notification.update);
                    let _ = route.send(update).await;
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, cx| {
                let shared = on_permission.clone();
                tokio::spawn(async move {
                    let session = request.session_id.clone();
                    let outcome = answer_permission(&shared, request).await;
                    let cancel = outcome.is_none();
                    let outcome = outcome.unwrap_or(RequestPermissionOutcome::Cancelled);
                    let _ = responder.respond(RequestPermissionResponse::new(outcome));
                    if cancel {
                        // non_interactive = "fail": nobody could be asked, so the turn ends.
                        let _ = cx.send_notification(CancelNotification::new(session));
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                let root = on_read.root(&request.session_id.0);
                let hidden = on_read.services.hidden.clone();
                tokio::spawn(async move {
                    let result = match root {
                        Some(root) => {
                            super::fs::read_text(
                                &root,
                                &hidden,
                                &request.path,
                                request.line,
                                request.limit,
                            )
                            .await
                        }
                        None => Err(FsError::UnknownSession),
                    };
                    let _ = responder.respond_with_result(
                        result
                            .map(ReadTextFileResponse::new)
                            .map_err(|e| refusal(e.code(), e)),
                    );
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                let root = on_write.root(&request.session_id.0);
                let hidden = on_write.services.hidden.clone();
                tokio::spawn(async move {
                    let result = match root {
                        Some(root) => {
                            super::fs::write_text(&root, &hidden, &request.path, &request.content)
                                .await
                        }
                        None => Err(FsError::UnknownSession),
                    };
                    let _ = responder.respond_with_result(
                        result
                            .map(|()| WriteTextFileResponse::new())
                            .map_err(|e| refusal(e.code(), e)),
                    );
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let shared = terminals.clone();
                async move |request: CreateTerminalRequest, responder, _cx| {
                    let result = match shared.root(&request.session_id.0) {
                        Some(root) => {
                            let env: Vec<(String, String)> = request
                                .env
                                .iter()
                                .map(|v| (v.name.clone(), v.value.clone()))
                                .collect();
                            shared.terminals.create(
                                &root,
                                &request.command,
                                &request.args,
                                &env,
                                request.cwd.as_deref(),
                                request.output_byte_limit,
                            )
                        }
                        None => Err(TermError::UnknownSession),
                    };
                    responder.respond_with_result(
                        result
                            .map(CreateTerminalResponse::new)
                            .map_err(term_refusal),
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let shared = terminals.clone();
                async move |request: TerminalOutputRequest, responder, _cx| {
                    let result = shared.terminals.output(&request.terminal_id.0).map(|out| {
                        TerminalOutputResponse::new(out.output, out.truncated)
                            .exit_status(out.exit.map(exit_status))
                    });
                    responder.respond_with_result(result.map_err(term_refusal))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let shared = terminals.clone();
                async move |request: WaitForTerminalExitRequest, responder, _cx| {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let result = shared
                            .terminals
                            .wait_for_exit(&request.terminal_id.0)
                            .await
                            .map(|exit| WaitForTerminalExitResponse::new(exit_status(exit)));
                        let _ = responder.respond_with_result(result.map_err(term_refusal));
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let shared = terminals.clone();
                async move |request: KillTerminalRequest, responder, _cx| {
                    let result = shared.terminals.kill(&request.terminal_id.0);
                    responder.respond_with_result(
                        result
                            .map(|()| KillTerminalResponse::new())
                            .map_err(term_refusal),
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let shared = terminals;
                async move |request: ReleaseTerminalRequest, responder, _cx| {
                    let result = shared.terminals.release(&request.terminal_id.0);
                    responder.respond_with_result(
                        result
                            .map(|()| ReleaseTerminalResponse::new())
                            .map_err(term_refusal),
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
}

fn exit_status(exit: TermExit) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(exit.code)
        .signal(exit.signal)
}

/// A refused client request, with the reason the agent (and its model) sees.
fn refusal(
    code: agent_client_protocol::ErrorCode,
    reason: impl std::fmt::Display,
) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(code, reason.to_string())
}

/// A refused or failed terminal request.
fn term_refusal(e: TermError) -> agent_client_protocol::Error {
    refusal(e.code(), e)
}

/// Tells the reader of the request's turn that chela's policy refused the tool call, and why
/// (SPEC 4: a refusal says which setting changes it).
async fn tell_refused(shared: &Shared, request: &RequestPermissionRequest, reason: String) {
    if let Some(route) = shared.route(&request.session_id.0) {
        let note = permission::refusal_note(&request.tool_call, reason);
        if route
            .send(SessionUpdate::ToolCallUpdate(note))
            .await
            .is_err()
        {
            tracing::debug!("the turn ended before a refusal could be shown");
        }
    }
}

/// Decides a permission request: by mode, or by asking a person in `ask` mode. `None`: nobody
/// could be asked and `non_interactive = "fail"`, so the turn must end.
async fn answer_permission(
    shared: &Shared,
    request: RequestPermissionRequest,
) -> Option<RequestPermissionOutcome> {
    let services = &shared.services;
    let options = request.options.clone();
    let kind = request.tool_call.fields.kind;
    let decision = match permission::decide(services.permissions, kind) {
        Some(Decision::Deny) => {
            let reason = permission::refusal_reason(services.permissions, false);
            tell_refused(shared, &request, reason).await;
            Decision::Deny
        }
        Some(decision) => decision,
        None => match &services.asker {
            Some(asker) => asker.ask(request).await.unwrap_or(Decision::Deny),
            None => {
                shared
                    .unasked
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match services.non_interactive {
                    NonInteractive::Deny => {
                        let reason = permission::refusal_reason(services.permissions, true);
                        tell_refused(shared, &request, reason).await;
                        Decision::Deny
                    }
                    NonInteractive::Fail => return None,
                }
            }
        },
    };
    let outcome = permission::outcome(&options, decision);
    tracing::debug!(
        chosen = %permission::chosen_kind(&options, &outcome),
        "answered a permission request"
    );
    Some(outcome)
}
