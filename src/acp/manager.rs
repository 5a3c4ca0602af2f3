//! [`AcpManager`]: bound conversations and their warm agent processes (SPEC 4).
//!
//! One process per binding, started on `/acp spawn` or on the first message after a restart
//! (resuming with `session/load` where the agent offers it), kept warm between turns and shut
//! down when idle or closed. Turns come from the binding's lane, so they are serialized like
//! any session's; their events go through the same reply path as the agent loop's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::StopReason;
use chela_channel::Conversation;
use tokio::sync::mpsc;

use super::AcpError;
use super::client::{AcpClient, Asker, Services, TurnEnd};
use super::coding_agent::CodingAgent;
use super::harness;
use super::updates::UpdateMapper;
use crate::agent::run::{RunError, RunOutcome, RunRequest, RunStatus};
use crate::config::{AcpConfig, Config};
use crate::domain::events::{Lifecycle, RunEvent};
use crate::domain::message::{AssistantMessage, ContentBlock, Message, Usage, now_ms};
use crate::store::{Binding, Store};

/// Updates buffered between an agent and the event mapper.
const UPDATE_BUFFER: usize = 256;

/// A live agent process of one binding.
struct Live {
    agent: Arc<dyn CodingAgent>,
    last_used: Instant,
}

/// One binding's slot: its live agent, if any. Locked while the agent starts or changes.
type Slot = Arc<tokio::sync::Mutex<Option<Live>>>;

/// What `/acp spawn` asks for.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// Session key of the conversation to bind.
    pub session_key: String,
    /// That conversation.
    pub conversation: Conversation,
    /// Harness name.
    pub harness: String,
    /// Working folder (already checked to exist).
    pub cwd: PathBuf,
    /// A label for `/acp status`.
    pub label: Option<String>,
    /// Who spawned it (`channel:user id`).
    pub owner: String,
}

/// Bound conversations and their agent processes.
pub struct AcpManager {
    config: AcpConfig,
    workspace: PathBuf,
    sandbox: Arc<crate::sandbox::ChildSandbox>,
    /// chela's own files, refused by the file service whatever the sandbox.
    hidden: Arc<[PathBuf]>,
    /// The MCP servers coding agents get.
    mcp_servers: Arc<[agent_client_protocol::v1::schema::McpServer]>,
    store: Store,
    slots: Mutex<HashMap<String, Slot>>,
    /// Who answers permission questions in `ask` mode (`None`: nobody can be asked).
    asker: Option<Arc<dyn AskerFor>>,
}

/// Makes an [`Asker`] for one binding (mode `ask`): the gateway asks in its conversation.
pub trait AskerFor: Send + Sync {
    /// The asker for `binding`.
    fn asker_for(&self, binding: &Binding) -> Arc<dyn Asker>;
}

impl AcpManager {
    /// A manager with nothing live yet; `asker` answers permission questions in `ask` mode.
    pub fn new(config: &Config, store: Store, asker: Option<Arc<dyn AskerFor>>) -> AcpManager {
        AcpManager {
            config: config.acp.clone(),
            workspace: config.agent.workspace.clone(),
            sandbox: Arc::new(crate::sandbox::ChildSandbox::announced(
                config.acp.sandbox,
                config.acp.network.connect_ports(&config.acp.allow_ports),
                config,
                "[acp] sandbox",
            )),
            hidden: crate::sandbox::child::hidden(config).into(),
            mcp_servers: super::mcp_servers::for_coding_agents(config).into(),
            store,
            slots: Mutex::new(HashMap::new()),
            asker,
        }
    }

    /// The `[acp]` config.
    pub fn config(&self) -> &AcpConfig {
        &self.config
    }

    /// The binding of session `key`, if it is bound.
    pub fn binding(&self, key: &str) -> Option<Binding> {
        self.store.get_binding(key).ok().flatten()
    }

    /// The default working folder for `harness`: its `cwd`, else the agent workspace.
    pub fn default_cwd(&self, harness: &str) -> PathBuf {
        harness::resolve(&self.config, harness)
            .ok()
            .and_then(|h| h.cwd)
            .unwrap_or_else(|| self.workspace.clone())
    }

    /// Starts the agent and a session for `spec` and persists the binding. Returns the binding
    /// and the agent's name.
    pub async fn spawn(&self, spec: SpawnSpec) -> Result<(Binding, String), AcpError> {
        let slot = self.slot(&spec.session_key);
        let mut live = slot.lock().await;
        if let Some(old) = live.take() {
            old.agent.shutdown().await;
        }
        let now = now_ms();
        let mut binding = Binding {
            session_key: spec.session_key,
            conversation: spec.conversation,
            harness: spec.harness,
            cwd: spec.cwd,
            acp_session_id: None,
            label: spec.label,
            owner: spec.owner,
            created_ms: now,
            last_active_ms: now,
            idle_s: None,
        };
        let agent = self.start(&binding).await?;
        let id = match agent.new_session(&binding.cwd).await {
            Ok(id) => id,
            Err(e) => {
                agent.shutdown().await;
                return Err(e);
            }
        };
        binding.acp_session_id = Some(id);
        if let Err(e) = self.store.put_binding(&binding).await {
            agent.shutdown().await;
            return Err(AcpError::Store(e.to_string()));
        }
        let name = agent.describe();
        *live = Some(Live {
            agent,
            last_used: Instant::now(),
        });
        Ok((binding, name))
    }

    /// Runs one turn of the bound session `request.session_key` through its agent.
    pub async fn run(&self, request: RunRequest) -> RunOutcome {
        let RunRequest {
            session_key,
            text,
            cancel,
            mut steer,
            steer_files: _,
            events,
            reply_to: _,
            media,
            run_id: _,
        } = request;
        let _ = events.send(RunEvent::Lifecycle(Lifecycle::Start)).await;
        let outcome =
            |status: RunStatus,
             text: String,
             steer: &mut mpsc::Receiver<Box<crate::agent::run::Steer>>| {
                let mut leftover = Vec::new();
                while let Ok(s) = steer.try_recv() {
                    leftover.push(*s);
                }
                RunOutcome {
                    status,
                    text,
                    steered_seqs: Vec::new(),
                    leftover,
                    usage: Usage::default(),
                    context_tokens: 0,
                    cost_usd: None,
                }
            };
        let Some(mut binding) = self.binding(&session_key) else {
            let message = "this conversation is no longer bound to a coding agent".to_owned();
            let _ = events
                .send(RunEvent::Lifecycle(Lifecycle::Error {
                    message: message.clone(),
                }))
                .await;
            return outcome(
                RunStatus::Error(RunError::CodingAgent(message)),
                String::new(),
                &mut steer,
            );
        };
        self.record(&binding, Message::user(&text));
        let mut notes = Vec::new();
        let agent = match self.live_agent(&mut binding, &mut notes).await {
            Ok(agent) => agent,
            Err(e) => {
                let message = format!("{e}. Try again, or /acp close.");
                let _ = events
                    .send(RunEvent::Lifecycle(Lifecycle::Error {
                        message: message.clone(),
                    }))
                    .await;
                return outcome(
                    RunStatus::Error(RunError::CodingAgent(message)),
                    String::new(),
                    &mut steer,
                );
            }
        };
        for note in notes {
            let _ = events
                .send(RunEvent::Assistant {
                    delta: format!("({note})\n\n"),
                })
                .await;
        }
        let session = binding.acp_session_id.clone().unwrap_or_default();
        let (updates_tx, mut updates_rx) = mpsc::channel(UPDATE_BUFFER);
        let progress = self.config.progress;
        let forward = {
            let events = events.clone();
            tokio::spawn(async move {
                let mut mapper = UpdateMapper::new(progress);
                while let Some(update) = updates_rx.recv().await {
                    for event in mapper.map(&update) {
                        let _ = events.send(event).await;
                    }
                }
                mapper.text().to_owned()
            })
        };
        let prompt = super::media::prompt_for(
            text,
            &media,
            &self.workspace,
            &binding.cwd,
            agent.accepts_images(),
        )
        .await;
        let result = agent.prompt(&session, &prompt, updates_tx, &cancel).await;
        let streamed = forward.await.unwrap_or_default();
        binding.last_active_ms = now_ms();
        if let Err(e) = self.store.put_binding(&binding).await {
            tracing::warn!(error = %e, session = %session_key, "cannot record the binding's activity");
        }
        if let Some(live) = self.slot(&session_key).lock().await.as_mut() {
            live.last_used = Instant::now();
        }
        let (status, lifecycle) = match result {
            Ok(TurnEnd::Stopped(StopReason::Cancelled)) => aborted(),
            Ok(_) if cancel.is_cancelled() => aborted(),
            Ok(TurnEnd::Stopped(reason)) => match stop_note(reason) {
                Some(note) => (
                    RunStatus::Ok,
                    Lifecycle::Error {
                        message: note.to_owned(),
                    },
                ),
                None => ended(&streamed),
            },
            Ok(TurnEnd::Closed) => {
                self.drop_live(&session_key).await;
                ended(&streamed)
            }
            Err(e) => {
                self.drop_live(&session_key).await;
                let message = match e {
                    AcpError::Crashed { .. } | AcpError::Protocol { .. } => {
                        format!("{e}. The next message starts it again.")
                    }
                    e => e.to_string(),
                };
                (
                    RunStatus::Error(RunError::CodingAgent(message.clone())),
                    Lifecycle::Error { message },
                )
            }
        };
        self.record(&binding, assistant(&binding.harness, &streamed, &status));
        let _ = events.send(RunEvent::Lifecycle(lifecycle)).await;
        outcome(status, streamed, &mut steer)
    }

    /// Runs `task` once on a fresh `harness` process in `cwd`, with no binding and nobody to
    /// ask (`non_interactive` decides permission questions in `ask` mode). Streams events to
    /// `events` when given; returns the agent's answer.
    pub async fn run_once(
        &self,
        harness_name: &str,
        cwd: &Path,
        task: &str,
        cancel: &tokio_util::sync::CancellationToken,
        events: Option<mpsc::Sender<RunEvent>>,
    ) -> Result<String, AcpError> {
        let harness = harness::resolve(&self.config, harness_name)?;
        let client = AcpClient::start(harness_name, &harness, cwd, self.services(None)).await?;
        let progress = self.config.progress;
        let turn = async {
            let id = client.new_session(cwd).await?;
            let (tx, mut rx) = mpsc::channel(UPDATE_BUFFER);
            let forward = tokio::spawn(async move {
                let mut mapper = UpdateMapper::new(progress);
                while let Some(update) = rx.recv().await {
                    for event in mapper.map(&update) {
                        if let Some(events) = &events {
                            let _ = events.send(event).await;
                        }
                    }
                }
                mapper.text().to_owned()
            });
            let end = client.prompt(&id, task, tx, cancel).await;
            let text = forward.await.unwrap_or_default();
            end.map(|end| (end, text))
        };
        let result = turn.await;
        let unasked = client.unasked();
        client.shutdown().await;
        let (end, mut text) = result?;
        if unasked > 0 {
            text.push_str(&format!(
                "\n\n({unasked} permission request(s) needed an answer and nobody could be asked; \
                 [acp] non_interactive = {} decided)",
                self.config.non_interactive
            ));
        }
        if end == TurnEnd::Stopped(StopReason::Cancelled) {
            text.push_str("\n\n(the coding agent's turn was cancelled)");
        }
        Ok(text)
    }

    /// Resets the bound session in place (`/new`, `/reset`): closes the agent's session and
    /// starts a new one in the same folder.
    pub async fn reset(&self, key: &str) -> Result<Binding, AcpError> {
        let mut binding = self
            .binding(key)
            .ok_or_else(|| AcpError::NotBound(key.to_owned()))?;
        let mut notes = Vec::new();
        let agent = self.live_agent(&mut binding, &mut notes).await?;
        if let Some(old) = binding.acp_session_id.take() {
            agent.close_session(&old).await;
        }
        let id = agent.new_session(&binding.cwd).await?;
        binding.acp_session_id = Some(id);
        binding.last_active_ms = now_ms();
        self.store
            .put_binding(&binding)
            .await
            .map_err(|e| AcpError::Store(e.to_string()))?;
        Ok(binding)
    }

    /// Unbinds session `key` and ends its agent process; returns the old binding.
    pub async fn close(&self, key: &str) -> Result<Option<Binding>, AcpError> {
        let binding = self
            .store
            .remove_binding(key)
            .await
            .map_err(|e| AcpError::Store(e.to_string()))?;
        let slot = self.slot(key);
        let live = slot.lock().await.take();
        if let Some(live) = live {
            if let Some(id) = binding.as_ref().and_then(|b| b.acp_session_id.as_deref()) {
                live.agent.close_session(id).await;
            }
            live.agent.shutdown().await;
        }
        if let Ok(mut slots) = self.slots.lock() {
            slots.remove(key);
        }
        Ok(binding)
    }

    /// Sets how long binding `key` may sit idle before it expires (`/session idle`).
    pub async fn set_idle(&self, key: &str, idle: Duration) -> Result<Binding, AcpError> {
        let mut binding = self
            .binding(key)
            .ok_or_else(|| AcpError::NotBound(key.to_owned()))?;
        binding.idle_s = Some(idle.as_secs().max(1));
        binding.last_active_ms = now_ms();
        self.store
            .put_binding(&binding)
            .await
            .map_err(|e| AcpError::Store(e.to_string()))?;
        Ok(binding)
    }

    /// A few lines about binding `key` for `/acp status` and `/status`.
    pub async fn status(&self, key: &str) -> Option<String> {
        let binding = self.binding(key)?;
        let slot = self.slot(key);
        // The slot is held while the agent starts (which can take a while): do not wait.
        let process = match slot.try_lock() {
            Err(_) => "starting…".to_owned(),
            Ok(live) => match live.as_ref() {
                Some(live) if live.agent.is_alive() => format!(
                    "{} (pid {}, idle {} s)",
                    live.agent.describe(),
                    live.agent.pid(),
                    live.last_used.elapsed().as_secs()
                ),
                _ => "not running (starts with the next message)".to_owned(),
            },
        };
        let mut lines = vec![
            format!("Coding agent: {}", binding.harness),
            format!("Process: {process}"),
            format!("Folder: {}", binding.cwd.display()),
            format!(
                "ACP session: {}",
                binding.acp_session_id.as_deref().unwrap_or("none yet")
            ),
        ];
        if let Some(label) = &binding.label {
            lines.insert(1, format!("Label: {label}"));
        }
        Some(lines.join("\n"))
    }

    /// Expires idle bindings and shuts down idle processes. Returns the expired bindings
    /// (their conversations are told).
    pub async fn housekeeping(&self) -> Vec<Binding> {
        let now = now_ms();
        let mut expired = Vec::new();
        for binding in self.store.list_bindings().unwrap_or_default() {
            let idle_s = binding.idle_s.unwrap_or(self.config.binding_idle_s);
            if now.saturating_sub(binding.last_active_ms) > idle_s.saturating_mul(1000)
                && let Ok(Some(b)) = self.close(&binding.session_key).await
            {
                expired.push(b);
            }
        }
        let slots: Vec<Slot> = match self.slots.lock() {
            Ok(slots) => slots.values().cloned().collect(),
            Err(_) => Vec::new(),
        };
        let process_idle = Duration::from_secs(self.config.process_idle_s);
        for slot in slots {
            // A slot in use (a turn starting) is not idle.
            let Ok(mut live) = slot.try_lock() else {
                continue;
            };
            if live
                .as_ref()
                .is_some_and(|l| l.last_used.elapsed() > process_idle)
                && let Some(l) = live.take()
            {
                l.agent.shutdown().await;
            }
        }
        expired
    }

    /// Ends every agent process (gateway shutdown); bindings stay for the next start.
    pub async fn shutdown(&self) {
        let slots: Vec<Slot> = match self.slots.lock() {
            Ok(mut slots) => slots.drain().map(|(_, s)| s).collect(),
            Err(_) => Vec::new(),
        };
        for slot in slots {
            if let Some(live) = slot.lock().await.take() {
                live.agent.shutdown().await;
            }
        }
    }

    /// What the client offers its agent, with `asker` answering in `ask` mode.
    fn services(&self, asker: Option<Arc<dyn Asker>>) -> Services {
        Services {
            permissions: self.config.permissions,
            asker,
            terminal_output_limit: self.config.terminal_output_limit,
            non_interactive: self.config.non_interactive,
            sandbox: self.sandbox.clone(),
            hidden: self.hidden.clone(),
            mcp_servers: self.mcp_servers.clone(),
        }
    }

    /// Live agent processes (a slot busy starting or changing its agent counts as one).
    pub fn live_count(&self) -> usize {
        let Ok(slots) = self.slots.lock() else {
            return 0;
        };
        slots
            .values()
            .filter(|slot| slot.try_lock().map_or(true, |live| live.is_some()))
            .count()
    }

    fn slot(&self, key: &str) -> Slot {
        match self.slots.lock() {
            Ok(mut slots) => slots.entry(key.to_owned()).or_default().clone(),
            Err(_) => Slot::default(),
        }
    }

    async fn drop_live(&self, key: &str) {
        if let Some(live) = self.slot(key).lock().await.take() {
            live.agent.shutdown().await;
        }
    }

    async fn start(&self, binding: &Binding) -> Result<Arc<dyn CodingAgent>, AcpError> {
        let harness = harness::resolve(&self.config, &binding.harness)?;
        let asker = self.asker.as_ref().map(|a| a.asker_for(binding));
        let services = self.services(asker);
        let client = AcpClient::start(&binding.harness, &harness, &binding.cwd, services).await?;
        Ok(Arc::new(client))
    }

    /// The binding's live agent, starting it (and resuming or replacing its session) if needed.
    async fn live_agent(
        &self,
        binding: &mut Binding,
        notes: &mut Vec<String>,
    ) -> Result<Arc<dyn CodingAgent>, AcpError> {
        let slot = self.slot(&binding.session_key);
        let mut live = slot.lock().await;
        if let Some(l) = live.as_ref().filter(|l| l.agent.is_alive()) {
            return Ok(l.agent.clone());
        }
        let agent = self.start(binding).await?;
        let resumed = match binding.acp_session_id.as_deref() {
            Some(id) if agent.can_load() => match agent.load_session(id, &binding.cwd).await {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot resume the ACP session");
                    notes.push(format!(
                        "{} could not resume its session ({e}); this is a new one",
                        binding.harness
                    ));
                    false
                }
            },
            Some(_) => {
                notes.push(format!(
                    "{} cannot resume sessions; this is a new one",
                    binding.harness
                ));
                false
            }
            None => false,
        };
        if !resumed {
            let id = match agent.new_session(&binding.cwd).await {
                Ok(id) => id,
                Err(e) => {
                    agent.shutdown().await;
                    return Err(e);
                }
            };
            binding.acp_session_id = Some(id);
            self.store
                .put_binding(binding)
                .await
                .map_err(|e| AcpError::Store(e.to_string()))?;
        }
        *live = Some(Live {
            agent: agent.clone(),
            last_used: Instant::now(),
        });
        Ok(agent)
    }

    fn record(&self, binding: &Binding, message: Message) {
        let key = &binding.session_key;
        let cwd = binding.cwd.to_string_lossy();
        let result = self
            .store
            .ensure_session(key, &cwd)
            .and_then(|_| self.store.append_message(key, &message));
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot record an ACP turn in the transcript");
        }
    }
}

fn aborted() -> (RunStatus, Lifecycle) {
    (
        RunStatus::Aborted,
        Lifecycle::End {
            text: String::new(),
            aborted: true,
        },
    )
}

fn ended(text: &str) -> (RunStatus, Lifecycle) {
    (
        RunStatus::Ok,
        Lifecycle::End {
            text: text.to_owned(),
            aborted: false,
        },
    )
}

/// A short note for stop reasons other than a normal end.
fn stop_note(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::MaxTokens => Some("the agent hit its token limit"),
        StopReason::MaxTurnRequests => Some("the agent hit its turn limit"),
        StopReason::Refusal => Some("the agent refused"),
        _ => None,
    }
}

fn assistant(harness: &str, text: &str, status: &RunStatus) -> Message {
    let (stop_reason, error_message) = match status {
        RunStatus::Ok => (crate::domain::message::StopReason::Stop, None),
        RunStatus::Aborted => (crate::domain::message::StopReason::Aborted, None),
        RunStatus::Error(e) => (
            crate::domain::message::StopReason::Error,
            Some(e.to_string()),
        ),
    };
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text(text)],
        provider: "acp".to_owned(),
        model: harness.to_owned(),
        usage: Usage::default(),
        stop_reason,
        error_message,
        timestamp: now_ms(),
    })
}

/// Why a `--cwd` argument is refused; the text is what the user or the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CwdError {
    /// The path exists but is not a folder.
    #[error("{} is not a folder", path.display())]
    NotAFolder {
        /// The resolved path.
        path: PathBuf,
    },
    /// The path cannot be resolved (it does not exist, or is not reachable).
    #[error("{}: {source}", path.display())]
    Unresolvable {
        /// The path as joined to the base.
        path: PathBuf,
        /// Why it cannot be resolved.
        source: std::io::Error,
    },
}

impl From<CwdError> for crate::agent::tools::refusal::ToolRefusal {
    fn from(e: CwdError) -> Self {
        crate::agent::tools::refusal::ToolRefusal::Refused(e.to_string())
    }
}

/// Checks a `--cwd` argument: `~` and relative paths resolve against `base`; it must be an
/// existing folder.
pub fn resolve_cwd(base: &Path, requested: &str) -> Result<PathBuf, CwdError> {
    let expanded = match requested.strip_prefix("~/") {
        Some(rest) => dirs::home_dir().map_or_else(|| PathBuf::from(requested), |h| h.join(rest)),
        None if requested == "~" => dirs::home_dir().unwrap_or_else(|| PathBuf::from("~")),
        None => PathBuf::from(requested),
    };
    let path = base.join(expanded);
    match std::fs::canonicalize(&path) {
        Ok(path) if path.is_dir() => Ok(path),
        Ok(path) => Err(CwdError::NotAFolder { path }),
        Err(source) => Err(CwdError::Unresolvable { path, source }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use chela_channel::ChatKind;

    fn binding(key: &str, last_active_ms: u64, idle_s: Option<u64>) -> Binding {
        Binding {
            session_key: key.into(),
            conversation: Conversation {
                channel: "terminal".into(),
                account: "default".into(),
                kind: ChatKind::Direct,
                chat_id: "me".into(),
                thread_id: None,
            },
            harness: "fake".into(),
            cwd: PathBuf::from("/tmp"),
            acp_session_id: Some("s".into()),
            label: None,
            owner: "terminal:me".into(),
            created_ms: last_active_ms,
            last_active_ms,
            idle_s,
        }
    }

    #[tokio::test]
    async fn idle_bindings_expire_by_their_own_or_the_configured_time() {
        let store = Store::temporary().unwrap();
        let manager = AcpManager::new(&Config::default(), store.clone(), None);
        let now = now_ms();
        let day = 24 * 3600 * 1000;
        store
            .put_binding(&binding("old", now - day - 60_000, None))
            .await
            .unwrap();
        store
            .put_binding(&binding("fresh", now - 60_000, None))
            .await
            .unwrap();
        store
            .put_binding(&binding("short", now - 120_000, Some(60)))
            .await
            .unwrap();
        store
            .put_binding(&binding("long", now - 2 * day, Some(3 * 24 * 3600)))
            .await
            .unwrap();
        let mut expired: Vec<String> = manager
            .housekeeping()
            .await
            .into_iter()
            .map(|b| b.session_key)
            .collect();
        expired.sort();
        assert_eq!(expired, ["old", "short"]);
        assert!(manager.binding("old").is_none());
        assert!(manager.binding("fresh").is_some());
        assert!(manager.binding("long").is_some());
    }

    #[tokio::test]
    async fn set_idle_needs_a_binding_and_resets_the_clock() {
        let store = Store::temporary().unwrap();
        let manager = AcpManager::new(&Config::default(), store.clone(), None);
        assert!(matches!(
            manager.set_idle("k", Duration::from_secs(60)).await,
            Err(AcpError::NotBound(_))
        ));
        store.put_binding(&binding("k", 1, None)).await.unwrap();
        let b = manager
            .set_idle("k", Duration::from_secs(7200))
            .await
            .unwrap();
        assert_eq!(b.idle_s, Some(7200));
        assert!(b.last_active_ms > 1);
    }

    #[test]
    fn cwd_must_be_an_existing_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let app = resolve_cwd(dir.path(), "app").unwrap();
        assert_eq!(app, std::fs::canonicalize(dir.path().join("app")).unwrap());
        let file = resolve_cwd(dir.path(), "file").unwrap_err();
        assert!(matches!(file, CwdError::NotAFolder { .. }), "{file:?}");
        assert!(file.to_string().contains("not a folder"));
        let missing = resolve_cwd(dir.path(), "missing").unwrap_err();
        assert!(
            matches!(&missing, CwdError::Unresolvable { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
    }
}
