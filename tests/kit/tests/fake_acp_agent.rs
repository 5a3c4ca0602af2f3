//! Drives the `fake-acp-agent` binary over its stdio with the `agent-client-protocol`
//! crate's client side, the way chela's ACP client will.
//!
//! The client here never awaits the agent inside a handler: notifications and the agent's
//! requests are pushed to a channel (a request together with its `Responder`, answered later
//! by the test body), and slow work (a terminal's exit) runs in a task spawned on the
//! connection.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, ContentBlock, ContentChunk, CreateTerminalRequest,
    CreateTerminalResponse, InitializeRequest, InitializeResponse, LoadSessionRequest,
    NewSessionRequest, PermissionOptionKind, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionId, SessionNotification, SessionUpdate, StopReason,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, ToolCallStatus, ToolKind,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, ByteStreams, Client, Error, ErrorCode, UntypedMessage, is_incoming_transport_closed,
};
use serde_json::Value;
use tokio::process::Child;
use tokio::sync::{mpsc, watch};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

/// A generous bound so a broken agent fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

/// What the agent sent us, in arrival order.
#[derive(Debug)]
enum Event {
    /// A `session/update` the schema knows.
    Update(SessionNotification),
    /// A notification that is not a known `session/update` (raw params).
    Other { method: String, params: Value },
    /// `session/request_permission`, to be answered by the test.
    Permission(
        RequestPermissionRequest,
        Responder<RequestPermissionResponse>,
    ),
}

/// Files the client serves for `fs/*`, keyed by absolute path.
type Files = Arc<Mutex<HashMap<PathBuf, String>>>;

/// A finished terminal command: output and exit status.
type Finished = Option<(String, TerminalExitStatus)>;

#[derive(Clone, Default)]
struct Terminals {
    next: Arc<AtomicU32>,
    running: Arc<Mutex<HashMap<String, watch::Receiver<Finished>>>>,
}

/// One agent process with its own state dir, log and cwd.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let fixture = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(fixture.cwd()).unwrap();
        fixture
    }

    fn cwd(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("methods.jsonl")
    }

    fn spawn(&self, extra_env: &[(&str, &str)]) -> Child {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_fake-acp-agent"));
        command
            .env("FAKE_ACP_STATE", self.dir.path().join("state"))
            .env("FAKE_ACP_LOG", self.log_path())
            .env_remove("FAKE_ACP_NO_LOAD")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (key, value) in extra_env {
            command.env(key, value);
        }
        command.spawn().unwrap()
    }

    /// The method log as `(method, sessionId)` plus the permission reply lines.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn logged_methods(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter_map(|entry| entry["method"].as_str().map(str::to_owned))
            .collect()
    }
}

/// The test body's view of the connection.
struct Session {
    cx: ConnectionTo<Agent>,
    events: mpsc::UnboundedReceiver<Event>,
    files: Files,
}

impl Session {
    async fn initialize(&self) -> InitializeResponse {
        self.cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
            .unwrap()
    }

    async fn new_session(&self, cwd: &Path) -> SessionId {
        self.cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await
            .unwrap()
            .session_id
    }

    fn send_prompt(
        &self,
        id: &SessionId,
        text: &str,
    ) -> impl Future<Output = Result<StopReason, Error>> + use<> {
        let sent = self
            .cx
            .send_request(PromptRequest::new(id.clone(), vec![text.into()]))
            .block_task();
        async move { Ok(sent.await?.stop_reason) }
    }

    /// Sends a prompt, waits for its response, returns it with the events before it.
    async fn prompt(&mut self, id: &SessionId, text: &str) -> (StopReason, Vec<Event>) {
        let stop = self.send_prompt(id, text).await.unwrap();
        (stop, self.drain())
    }

    /// The events already received (everything sent before the last response).
    fn drain(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            events.push(event);
        }
        events
    }

    async fn next_event(&mut self) -> Event {
        tokio::time::timeout(PATIENCE, self.events.recv())
            .await
            .expect("no event from the agent")
            .expect("event channel closed")
    }

    fn cancel(&self, id: &SessionId) {
        self.cx
            .send_notification(CancelNotification::new(id.clone()))
            .unwrap();
    }
}

/// Text of the agent message chunks among `events`.
fn agent_text(events: &[Event]) -> String {
    chunks(events).concat()
}

fn chunks(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Update(SessionNotification {
                update:
                    SessionUpdate::AgentMessageChunk(ContentChunk {
                        content: ContentBlock::Text(text),
                        ..
                    }),
                ..
            }) => Some(text.text.clone()),
            _ => None,
        })
        .collect()
}

/// Runs `body` as the foreground of a client connection to `child`.
async fn connect<T>(
    child: &mut Child,
    files: Files,
    body: impl AsyncFnOnce(Session) -> Result<T, Error>,
) -> Result<T, Error> {
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    let (tx, events) = mpsc::unbounded_channel();
    let terminals = Terminals::default();
    let (notify_tx, permission_tx) = (tx.clone(), tx);
    let (read_files, write_files) = (files.clone(), files.clone());
    let (t1, t2, t3, t4) = (
        terminals.clone(),
        terminals.clone(),
        terminals.clone(),
        terminals,
    );
    let connection = Client
        .v1()
        .name("fake-acp-agent-test")
        // One untyped handler for every notification: a typed `SessionNotification` handler
        // would fail to parse an unknown `sessionUpdate` kind and drop it.
        .on_receive_notification(
            async move |message: UntypedMessage, _cx| {
                let (method, params) = message.into_parts();
                let event = match serde_json::from_value::<SessionNotification>(params.clone()) {
                    Ok(update) if method == "session/update" => Event::Update(update),
                    _ => Event::Other { method, params },
                };
                notify_tx.send(event).ok();
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                // Answered later by the test body: never wait here.
                permission_tx
                    .send(Event::Permission(request, responder))
                    .map_err(|_| Error::internal_error())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                let content = read_files.lock().unwrap().get(&request.path).cloned();
                match content {
                    Some(content) => responder.respond(ReadTextFileResponse::new(content)),
                    None => responder.respond_with_error(
                        agent_client_protocol::v1::schema::Error::resource_not_found(None).into(),
                    ),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                write_files
                    .lock()
                    .unwrap()
                    .insert(request.path, request.content);
                responder.respond(WriteTextFileResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, cx| {
                let mut command = tokio::process::Command::new(&request.command);
                command
                    .args(&request.args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                if let Some(cwd) = &request.cwd {
                    command.current_dir(cwd);
                }
                let child = match command.spawn() {
                    Ok(child) => child,
                    Err(error) => return responder.respond_with_internal_error(error),
                };
                let id = format!("term-{}", t1.next.fetch_add(1, Ordering::Relaxed));
                let (done_tx, done_rx) = watch::channel(None);
                t1.running.lock().unwrap().insert(id.clone(), done_rx);
                // Waiting for the command must not hold the dispatch loop.
                cx.spawn(async move {
                    let output = child
                        .wait_with_output()
                        .await
                        .map_err(Error::into_internal_error)?;
                    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&output.stderr));
                    let status = TerminalExitStatus::new().exit_code(
                        output
                            .status
                            .code()
                            .and_then(|code| u32::try_from(code).ok()),
                    );
                    done_tx.send(Some((text, status))).ok();
                    Ok(())
                })?;
                responder.respond(CreateTerminalResponse::new(id))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx| {
                let running = t2
                    .running
                    .lock()
                    .unwrap()
                    .get(&*request.terminal_id.0)
                    .cloned();
                let Some(mut done) = running else {
                    return responder.respond_with_error(Error::invalid_params());
                };
                cx.spawn(async move {
                    let finished = done
                        .wait_for(Option::is_some)
                        .await
                        .map_err(Error::into_internal_error)?;
                    let status = finished
                        .as_ref()
                        .map(|(_, status)| status.clone())
                        .unwrap_or_default();
                    responder.respond(WaitForTerminalExitResponse::new(status))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                let finished = t3
                    .running
                    .lock()
                    .unwrap()
                    .get(&*request.terminal_id.0)
                    .map(|done| done.borrow().clone());
                match finished {
                    Some(Some((output, status))) => responder
                        .respond(TerminalOutputResponse::new(output, false).exit_status(status)),
                    Some(None) => responder.respond(TerminalOutputResponse::new("", false)),
                    None => responder.respond_with_error(Error::invalid_params()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                t4.running.lock().unwrap().remove(&*request.terminal_id.0);
                responder.respond(ReleaseTerminalResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx| {
            body(Session { cx, events, files }).await
        });
    tokio::time::timeout(PATIENCE, connection)
        .await
        .expect("the test timed out")
}

async fn exit_code(child: &mut Child) -> Option<i32> {
    tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("the agent did not exit")
        .unwrap()
        .code()
}

#[tokio::test]
async fn initialize_new_session_and_plain_prompt() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    let id = connect(&mut child, Files::default(), async |mut s| {
        let init = s.initialize().await;
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        assert!(init.agent_capabilities.load_session);
        assert!(init.agent_capabilities.session_capabilities.close.is_some());
        assert_eq!(init.agent_info.unwrap().name, "fake-acp-agent");

        let id = s.new_session(&cwd).await;
        let (stop, events) = s.prompt(&id, "hello world").await;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(chunks(&events).len(), 3);
        assert_eq!(agent_text(&events), "echo: hello world");
        Ok(id)
    })
    .await
    .unwrap();
    // Closing stdin ends the agent cleanly.
    assert_eq!(exit_code(&mut child).await, Some(0));
    assert_eq!(
        fixture.logged_methods(),
        ["initialize", "session/new", "session/prompt"]
    );
    assert_eq!(fixture.log()[2]["sessionId"], id.0.as_ref());
}

#[tokio::test]
async fn permission_is_answered_by_kind_not_by_id() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        for (kind, said, status) in [
            (
                PermissionOptionKind::AllowAlways,
                "allow_always",
                ToolCallStatus::Completed,
            ),
            (
                PermissionOptionKind::RejectOnce,
                "reject_once",
                ToolCallStatus::Failed,
            ),
        ] {
            let pending = s.send_prompt(&id, "perm delete the build dir");
            let Event::Update(first) = s.next_event().await else {
                panic!("expected the tool call first");
            };
            let SessionUpdate::ToolCall(call) = first.update else {
                panic!("expected a tool_call, got {:?}", first.update);
            };
            assert_eq!(call.title, "delete the build dir");
            assert_eq!(call.kind, ToolKind::Execute);
            assert_eq!(call.status, ToolCallStatus::Pending);

            let Event::Permission(request, responder) = s.next_event().await else {
                panic!("expected a permission request");
            };
            assert_eq!(request.tool_call.tool_call_id, call.tool_call_id);
            let option = request.options.iter().find(|o| o.kind == kind).unwrap();
            assert!(option.option_id.0.starts_with("opt-"), "ids are not kinds");
            responder
                .respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        option.option_id.clone(),
                    )),
                ))
                .unwrap();

            assert_eq!(pending.await.unwrap(), StopReason::EndTurn);
            let events = s.drain();
            assert_eq!(agent_text(&events), format!("permission: {said}"));
            let last = events.iter().rev().find_map(|event| match event {
                Event::Update(SessionNotification {
                    update: SessionUpdate::ToolCallUpdate(update),
                    ..
                }) => Some(update.clone()),
                _ => None,
            });
            let last = last.expect("a tool_call_update");
            assert_eq!(last.tool_call_id, call.tool_call_id);
            assert_eq!(last.fields.status, Some(status));
        }
        Ok(())
    })
    .await
    .unwrap();
    let replies: Vec<_> = fixture
        .log()
        .into_iter()
        .filter(|entry| entry["reply"] == "session/request_permission")
        .map(|entry| entry["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(replies, ["allow_always", "reject_once"]);
}

#[tokio::test]
async fn fs_requests_are_served_by_the_client_against_the_session_cwd() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    let files = Files::default();
    files
        .lock()
        .unwrap()
        .insert(cwd.join("notes.txt"), "hello from the client".to_owned());
    connect(&mut child, files.clone(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;

        let (stop, events) = s.prompt(&id, "fs-read notes.txt").await;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(agent_text(&events), "read: hello from the client");

        let (_, events) = s.prompt(&id, "fs-read /no/such/file").await;
        assert_eq!(agent_text(&events), "read error: Resource not found");

        let (_, events) = s.prompt(&id, "fs-write out/new.txt two  words").await;
        assert_eq!(agent_text(&events), "wrote out/new.txt");
        assert_eq!(
            s.files
                .lock()
                .unwrap()
                .get(&cwd.join("out/new.txt"))
                .unwrap(),
            "two  words"
        );
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn terminal_commands_run_on_the_client() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    std::fs::write(cwd.join("marker"), "").unwrap();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        let (stop, events) = s.prompt(&id, "term echo hi there").await;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(agent_text(&events), "exit 0: hi there");
        // The command runs in the session cwd.
        let (_, events) = s.prompt(&id, "term ls").await;
        assert_eq!(agent_text(&events), "exit 0: marker");
        let (_, events) = s.prompt(&id, "term false").await;
        assert_eq!(agent_text(&events), "exit 1: ");
        let (_, events) = s.prompt(&id, "term /no/such/program").await;
        assert!(agent_text(&events).starts_with("term error: "));
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn cancel_stops_a_slow_prompt_with_cancelled() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        // 100 chunks 200 ms apart would take 20 s: only the cancel ends it early.
        let pending = s.send_prompt(&id, "slow 100");
        let Event::Update(first) = s.next_event().await else {
            panic!("expected a chunk");
        };
        assert!(matches!(first.update, SessionUpdate::AgentMessageChunk(_)));
        s.cancel(&id);
        assert_eq!(pending.await.unwrap(), StopReason::Cancelled);
        let streamed = 1 + chunks(&s.drain()).len();
        assert!(streamed < 100, "{streamed} chunks");

        // The session takes the next prompt normally.
        let (stop, events) = s.prompt(&id, "after").await;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(agent_text(&events), "echo: after");

        // `$/cancel_request` for the prompt request works the same way.
        let sent =
            s.cx.send_request(PromptRequest::new(id.clone(), vec!["slow 100".into()]));
        s.next_event().await;
        sent.cancel().unwrap();
        let response = sent.block_task().await.unwrap();
        assert_eq!(response.stop_reason, StopReason::Cancelled);
        Ok(())
    })
    .await
    .unwrap();
    let log = fixture.log();
    assert!(
        log.iter()
            .any(|entry| entry["method"] == "session/cancel" && entry["sessionId"].is_string())
    );
    assert!(
        fixture
            .logged_methods()
            .contains(&"$/cancel_request".to_owned())
    );
}

#[tokio::test]
async fn cancel_during_a_permission_request_ends_the_turn_cancelled() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        let pending = s.send_prompt(&id, "perm deploy");
        let responder = loop {
            if let Event::Permission(_, responder) = s.next_event().await {
                break responder;
            }
        };
        // What a client does on /stop: cancel, then answer the pending request `cancelled`.
        s.cancel(&id);
        responder
            .respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ))
            .unwrap();
        assert_eq!(pending.await.unwrap(), StopReason::Cancelled);
        assert_eq!(agent_text(&s.drain()), "permission: cancelled");
        Ok(())
    })
    .await
    .unwrap();
    assert!(fixture.log().iter().any(|entry| {
        entry["reply"] == "session/request_permission" && entry["outcome"] == "cancelled"
    }));
}

#[tokio::test]
async fn plan_thought_and_tool_updates_then_unknown_update_kind() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        let (stop, events) = s.prompt(&id, "plan").await;
        assert_eq!(stop, StopReason::EndTurn);
        let kinds: Vec<&str> = events
            .iter()
            .map(|event| match event {
                Event::Update(update) => match &update.update {
                    SessionUpdate::Plan(plan) => {
                        assert_eq!(plan.entries.len(), 2);
                        "plan"
                    }
                    SessionUpdate::ToolCall(_) => "tool_call",
                    SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
                    SessionUpdate::AgentThoughtChunk(_) => "thought",
                    SessionUpdate::AgentMessageChunk(_) => "message",
                    _ => "other",
                },
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "plan",
                "tool_call",
                "tool_call_update",
                "thought",
                "message"
            ]
        );
        assert_eq!(agent_text(&events), "planned");

        let (stop, events) = s.prompt(&id, "unknown-update").await;
        assert_eq!(stop, StopReason::EndTurn);
        let Event::Other { method, params } = &events[0] else {
            panic!("expected the raw unknown update, got {:?}", events[0]);
        };
        assert_eq!(method, "session/update");
        assert_eq!(params["update"]["sessionUpdate"], "fake_unknown_update");
        assert_eq!(agent_text(&events), "after unknown update");
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn crash_fails_the_pending_prompt_and_exits_3() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        let error = s.send_prompt(&id, "crash").await.unwrap_err();
        assert!(is_incoming_transport_closed(&error), "{error:?}");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(exit_code(&mut child).await, Some(3));
}

#[tokio::test]
async fn noreply_close_streams_a_chunk_then_ends_without_a_stop_reason() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        let error = s.send_prompt(&id, "noreply-close").await.unwrap_err();
        assert!(is_incoming_transport_closed(&error), "{error:?}");
        assert_eq!(agent_text(&s.drain()), "closing without a reply");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(exit_code(&mut child).await, Some(0));
}

#[tokio::test]
async fn a_new_process_loads_the_session_and_replays_its_history() {
    let fixture = Fixture::new();
    let cwd = fixture.cwd();

    let mut first = fixture.spawn(&[]);
    let id = connect(&mut first, Files::default(), async |mut s| {
        s.initialize().await;
        let id = s.new_session(&cwd).await;
        s.prompt(&id, "first question").await;
        s.prompt(&id, "plan").await;
        Ok(id)
    })
    .await
    .unwrap();
    assert_eq!(exit_code(&mut first).await, Some(0));

    let mut second = fixture.spawn(&[]);
    connect(&mut second, Files::default(), async |mut s| {
        assert!(s.initialize().await.agent_capabilities.load_session);
        s.cx.send_request(LoadSessionRequest::new(id.clone(), &cwd))
            .block_task()
            .await
            .unwrap();
        // The replay arrived before the load response.
        let replay: Vec<(&str, String)> = s
            .drain()
            .into_iter()
            .map(|event| match event {
                Event::Update(SessionNotification {
                    update:
                        SessionUpdate::UserMessageChunk(ContentChunk {
                            content: ContentBlock::Text(text),
                            ..
                        }),
                    ..
                }) => ("user", text.text),
                Event::Update(SessionNotification {
                    update:
                        SessionUpdate::AgentMessageChunk(ContentChunk {
                            content: ContentBlock::Text(text),
                            ..
                        }),
                    ..
                }) => ("agent", text.text),
                other => panic!("unexpected replay event {other:?}"),
            })
            .collect();
        assert_eq!(
            replay,
            [
                ("user", "first question".to_owned()),
                ("agent", "echo: first question".to_owned()),
                ("user", "plan".to_owned()),
                ("agent", "planned".to_owned()),
            ]
        );
        let (stop, events) = s.prompt(&id, "again").await;
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(agent_text(&events), "echo: again");

        let missing =
            s.cx.send_request(LoadSessionRequest::new("fake-no-such-session", &cwd))
                .block_task()
                .await
                .unwrap_err();
        assert_eq!(missing.code, ErrorCode::from(-32002));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        fixture.logged_methods()[4..],
        [
            "initialize",
            "session/load",
            "session/prompt",
            "session/load"
        ]
    );
}

#[tokio::test]
async fn no_load_env_and_session_close() {
    let fixture = Fixture::new();
    let mut child = fixture.spawn(&[("FAKE_ACP_NO_LOAD", "1")]);
    let cwd = fixture.cwd();
    connect(&mut child, Files::default(), async |mut s| {
        assert!(!s.initialize().await.agent_capabilities.load_session);
        let id = s.new_session(&cwd).await;
        let refused =
            s.cx.send_request(LoadSessionRequest::new(id.clone(), &cwd))
                .block_task()
                .await
                .unwrap_err();
        assert_eq!(refused.code, ErrorCode::METHOD_NOT_FOUND);

        s.prompt(&id, "hi").await;
        s.cx.send_request(CloseSessionRequest::new(id.clone()))
            .block_task()
            .await
            .unwrap();
        let gone = s.send_prompt(&id, "hi again").await.unwrap_err();
        assert_eq!(gone.code, ErrorCode::from(-32002));
        Ok(())
    })
    .await
    .unwrap();
}
