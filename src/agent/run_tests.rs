//! Agent-loop tests with a scripted fake provider and fake tools: events, transcript pairing,
//! steering, cancellation, timeouts, errors, the model-call guard and history windows.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::stream;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::*;
use crate::agent::provider::{BoxFuture, EventStream, ToolSpec};
use crate::store::{Entry, EntryKind};

const KEY: &str = "agent:main:test";

/// What one model call does.
#[derive(Clone)]
enum Script {
    /// Streams these events and ends.
    Events(Vec<ProviderEvent>),
    /// Streams these events, then stays silent forever.
    Stall(Vec<ProviderEvent>),
    /// Streams these events, each after a (virtual) delay.
    Slow(Duration, Vec<ProviderEvent>),
    /// Streams these events, then breaks with this error.
    BreakAfter(Vec<ProviderEvent>, String),
    /// The call itself fails.
    Refuse(String),
}

struct FakeProvider {
    scripts: Mutex<VecDeque<Script>>,
    /// Used once the scripts run out.
    fallback: Script,
    requests: Mutex<Vec<ProviderRequest>>,
}

impl FakeProvider {
    fn new(scripts: Vec<Script>) -> Arc<Self> {
        Arc::new(FakeProvider {
            scripts: Mutex::new(scripts.into()),
            fallback: Script::Refuse("no script left".into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ProviderRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Provider for FakeProvider {
    fn name(&self) -> &str {
        "fake"
    }

    fn model(&self) -> &str {
        "fake-1"
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        self.requests.lock().unwrap().push(request);
        let script = self.scripts.lock().unwrap().pop_front();
        let script = script.unwrap_or_else(|| self.fallback.clone());
        let ok = |events: Vec<ProviderEvent>| stream::iter(events.into_iter().map(Ok));
        let out: Result<EventStream, ProviderError> = match script {
            Script::Events(events) => Ok(Box::pin(ok(events))),
            Script::Stall(events) => Ok(Box::pin(ok(events).chain(stream::pending()))),
            Script::Slow(delay, events) => Ok(Box::pin(ok(events).then(move |e| async move {
                tokio::time::sleep(delay).await;
                e
            }))),
            Script::BreakAfter(events, error) => Ok(Box::pin(
                ok(events).chain(stream::iter([Err(ProviderError::Stream(error))])),
            )),
            Script::Refuse(error) => Err(ProviderError::Stream(error)),
        };
        Box::pin(async move { out })
    }
}

fn done(stop_reason: StopReason) -> ProviderEvent {
    ProviderEvent::Done {
        stop_reason,
        usage: Usage {
            input: 10,
            output: 2,
            total_tokens: 12,
            ..Usage::default()
        },
    }
}

fn text_reply(parts: &[&str]) -> Script {
    let mut events: Vec<_> = parts
        .iter()
        .map(|p| ProviderEvent::TextDelta(p.to_string()))
        .collect();
    events.push(done(StopReason::Stop));
    Script::Events(events)
}

fn call(id: &str, name: &str) -> ProviderEvent {
    ProviderEvent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"id": id}),
    })
}

fn calls(list: &[(&str, &str)]) -> Script {
    let mut events: Vec<_> = list.iter().map(|(id, name)| call(id, name)).collect();
    events.push(done(StopReason::ToolUse));
    Script::Events(events)
}

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters: json!({"type": "object"}),
    }
}

/// Answers at once with `instant done`, recording its arguments.
#[derive(Default)]
struct InstantTool {
    args: Mutex<Vec<Value>>,
}

impl Tool for InstantTool {
    fn spec(&self) -> ToolSpec {
        spec("instant")
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        self.args.lock().unwrap().push(args);
        Box::pin(async { ToolOutput::ok("instant done") })
    }
}

/// Runs until the test releases it or its context's cancel fires.
#[derive(Default)]
struct GateTool {
    started: Notify,
    release: Notify,
    saw_cancel: AtomicBool,
}

impl Tool for GateTool {
    fn spec(&self) -> ToolSpec {
        spec("gate")
    }

    fn call<'a>(&'a self, _args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            self.started.notify_one();
            tokio::select! {
                _ = self.release.notified() => ToolOutput::ok("gate done"),
                _ = ctx.cancel.cancelled() => {
                    self.saw_cancel.store(true, Ordering::SeqCst);
                    ToolOutput::error("gate cancelled")
                }
            }
        })
    }
}

struct Harness {
    agent: Arc<Agent>,
    provider: Arc<FakeProvider>,
    instant: Arc<InstantTool>,
    gate: Arc<GateTool>,
}

/// One run in flight: its handles and, once awaited, its events.
struct Running {
    cancel: CancellationToken,
    steer: mpsc::Sender<Box<Steer>>,
    events: mpsc::Receiver<RunEvent>,
    task: tokio::task::JoinHandle<RunOutcome>,
}

impl Running {
    async fn finish(mut self) -> (RunOutcome, Vec<RunEvent>, mpsc::Sender<Box<Steer>>) {
        let outcome = self.task.await.unwrap();
        let mut events = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            events.push(e);
        }
        (outcome, events, self.steer)
    }
}

impl Harness {
    fn new(scripts: Vec<Script>) -> Self {
        Self::with_provider(FakeProvider::new(scripts))
    }

    fn with_provider(provider: Arc<FakeProvider>) -> Self {
        let instant = Arc::new(InstantTool::default());
        let gate = Arc::new(GateTool::default());
        let agent = Agent {
            provider: provider.clone(),
            tools: vec![instant.clone(), gate.clone()],
            specs: Default::default(),
            system_prompt: "you are a test".into(),
            skill_names: Vec::new(),
            mcp: None,
            policy: Default::default(),
            approver: Default::default(),
            id: "main".into(),
            store: Store::temporary().unwrap(),
            tool_context: ToolContext {
                workspace: std::env::temp_dir(),
                cancel: CancellationToken::new(),
                exec_timeout: Duration::from_secs(30),
                max_output_chars: 10_000,
                session_key: String::new(),
                run_id: String::new(),
                exec: Default::default(),
                reply_to: None,
                events: None,
            },
            run_timeout: Duration::from_secs(600),
            max_tokens: 1000,
            pricing: Default::default(),
            thinking: Default::default(),
            prompt_cache: false,
            vision: crate::config::Vision::Auto,
            shutdown: Default::default(),
            compaction: Default::default(),
            hooks: Default::default(),
            memory: Default::default(),
        };
        Harness {
            agent: Arc::new(agent),
            provider,
            instant,
            gate,
        }
    }

    fn start(&self, text: &str) -> Running {
        let cancel = CancellationToken::new();
        let (steer, steer_rx) = mpsc::channel(16);
        let (events_tx, events) = mpsc::channel(10_000);
        let request = RunRequest {
            session_key: KEY.into(),
            run_id: String::new(),
            text: text.into(),
            media: Vec::new(),
            cancel: cancel.clone(),
            steer: steer_rx,
            steer_files: None,
            events: events_tx,
            reply_to: None,
        };
        let agent = self.agent.clone();
        let task = tokio::spawn(async move { agent.run(request).await });
        Running {
            cancel,
            steer,
            events,
            task,
        }
    }

    async fn run(&self, text: &str) -> (RunOutcome, Vec<RunEvent>) {
        let (outcome, events, _) = self.start(text).finish().await;
        (outcome, events)
    }

    /// The transcript's messages, oldest first.
    fn transcript(&self) -> Vec<Message> {
        let entries = self.agent.store.entries(KEY).unwrap();
        entries
            .into_iter()
            .filter_map(|e| match e {
                Entry::Item(item) => match item.kind {
                    EntryKind::Message(m) => Some(m),
                    _ => None,
                },
                Entry::Session(_) => None,
            })
            .collect()
    }
}

fn user_text(m: &Message) -> Option<String> {
    match m {
        Message::User(u) => Some(crate::domain::message::text_of(&u.content)),
        _ => None,
    }
}

fn assistant(m: &Message) -> &AssistantMessage {
    match m {
        Message::Assistant(a) => a,
        other => panic!("expected an assistant message, got {other:?}"),
    }
}

/// (tool call id, result text, is_error) of a tool result.
fn result(m: &Message) -> (String, String, bool) {
    match m {
        Message::ToolResult(r) => (
            r.tool_call_id.clone(),
            crate::domain::message::text_of(&r.content),
            r.is_error,
        ),
        other => panic!("expected a tool result, got {other:?}"),
    }
}

fn tool_end(id: &str, name: &str, is_error: bool) -> RunEvent {
    let (id, name) = (id.to_string(), name.to_string());
    RunEvent::Tool(ToolEvent::End { id, name, is_error })
}

fn assert_result(m: &Message, id: &str, text: &str, is_error: bool) {
    assert_eq!(result(m), (id.to_string(), text.to_string(), is_error));
}

/// Every tool call is followed, before the next assistant message, by exactly its results.
fn assert_paired(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m {
            Message::Assistant(a) => {
                assert!(open.is_empty(), "calls left without results: {open:?}");
                for block in &a.content {
                    if let ContentBlock::ToolCall(c) = block {
                        open.push(c.id.clone());
                    }
                }
            }
            Message::ToolResult(r) => {
                let at = open.iter().position(|id| *id == r.tool_call_id);
                open.remove(at.expect("a result for an open call"));
            }
            Message::User(_) => {}
        }
    }
    assert!(open.is_empty(), "calls left without results: {open:?}");
}

#[tokio::test(start_paused = true)]
async fn plain_text_run_streams_deltas_ends_and_records_user_and_assistant() {
    let h = Harness::new(vec![text_reply(&["Hel", "lo"])]);
    let (outcome, events) = h.run("hi").await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!(outcome.text, "Hello");
    assert_eq!(outcome.usage.total_tokens, 12);
    assert_eq!(
        events,
        [
            RunEvent::Lifecycle(Lifecycle::Start),
            RunEvent::Assistant {
                delta: "Hel".into()
            },
            RunEvent::Assistant { delta: "lo".into() },
            RunEvent::Lifecycle(Lifecycle::End {
                text: "Hello".into(),
                aborted: false
            }),
        ]
    );
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .system
            .starts_with("you are a test\n## Tools\n- instant:")
    );
    assert_eq!(requests[0].max_tokens, 1000);
    let names: Vec<_> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["instant", "gate"]);
    // The request holds the agent's own specs, not copies of their schemas.
    let cached = h.agent.specs.specs(&h.agent.tools);
    assert!(
        requests[0]
            .tools
            .iter()
            .zip(cached)
            .all(|(a, b)| Arc::ptr_eq(a, b))
    );
    let transcript = h.transcript();
    assert_eq!(transcript.len(), 2);
    assert_eq!(user_text(&transcript[0]).as_deref(), Some("hi"));
    let answer = assistant(&transcript[1]);
    assert_eq!(answer.content, [ContentBlock::text("Hello")]);
    assert_eq!(answer.stop_reason, StopReason::Stop);
    assert_eq!(
        (answer.provider.as_str(), answer.model.as_str()),
        ("fake", "fake-1")
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_result_is_seen_by_the_next_model_call() {
    let h = Harness::new(vec![calls(&[("c1", "instant")]), text_reply(&["done"])]);
    let (outcome, events) = h.run("use the tool").await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!(outcome.text, "done");
    assert_eq!(*h.instant.args.lock().unwrap(), [json!({"id": "c1"})]);
    let (id, name) = ("c1".to_string(), "instant".to_string());
    let summary = r#"{"id":"c1"}"#.to_owned();
    let start = RunEvent::Tool(ToolEvent::Start { id, name, summary });
    let pos = |e: &RunEvent| events.iter().position(|x| x == e).expect("event sent");
    assert!(pos(&start) < pos(&tool_end("c1", "instant", false)));
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    let seen = &requests[1].messages;
    assert_eq!(seen.len(), 3);
    assert_eq!(assistant(&seen[1]).stop_reason, StopReason::ToolUse);
    assert_result(&seen[2], "c1", "instant done", false);
    let transcript = h.transcript();
    assert_eq!(transcript.len(), 4);
    assert_paired(&transcript);
}

#[tokio::test(start_paused = true)]
async fn steer_during_a_tool_skips_the_rest_of_the_batch_and_reaches_the_next_call() {
    let h = Harness::new(vec![
        calls(&[("c1", "gate"), ("c2", "instant")]),
        text_reply(&["steered answer"]),
    ]);
    let run = h.start("work");
    h.gate.started.notified().await;
    run.steer
        .send(Box::new(Steer {
            seqs: vec![7, 8],
            text: "also this".into(),
            files: Vec::new(),
        }))
        .await
        .unwrap();
    h.gate.release.notify_one();
    let (outcome, events, _) = run.finish().await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!(outcome.steered_seqs, vec![7, 8]);
    assert!(outcome.leftover.is_empty());
    assert!(h.instant.args.lock().unwrap().is_empty());
    assert!(events.contains(&tool_end("c2", "instant", true)));
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    let seen = &requests[1].messages;
    assert_result(&seen[2], "c1", "gate done", false);
    assert_result(&seen[3], "c2", SKIPPED_FOR_STEER, true);
    assert_eq!(user_text(&seen[4]).as_deref(), Some("also this"));
    assert_eq!(seen.len(), 5);
    assert_paired(&h.transcript());
}

#[tokio::test(start_paused = true)]
async fn a_steer_after_the_final_answer_comes_back_as_leftover() {
    let h = Harness::new(vec![Script::Slow(
        Duration::from_secs(1),
        vec![
            ProviderEvent::TextDelta("final".into()),
            done(StopReason::Stop),
        ],
    )]);
    let run = h.start("question");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let late = Steer {
        seqs: vec![3],
        text: "late".into(),
        files: Vec::new(),
    };
    run.steer.send(Box::new(late.clone())).await.unwrap();
    let (outcome, _, steer) = run.finish().await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert_eq!(outcome.leftover, vec![late.clone()]);
    assert!(outcome.steered_seqs.is_empty());
    assert!(
        steer.try_send(Box::new(late)).is_err(),
        "the run closes its receiver"
    );
    assert!(
        h.transcript()
            .iter()
            .all(|m| user_text(m).as_deref() != Some("late"))
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_during_the_model_stream_aborts_and_closes_emitted_calls() {
    let h = Harness::new(vec![Script::Stall(vec![
        ProviderEvent::TextDelta("partial".into()),
        call("c1", "instant"),
    ])]);
    let run = h.start("go");
    tokio::time::sleep(Duration::from_millis(10)).await;
    run.cancel.cancel();
    let (outcome, events, _) = run.finish().await;
    assert_eq!(outcome.status, RunStatus::Aborted);
    assert_eq!(
        events.last(),
        Some(&RunEvent::Lifecycle(Lifecycle::End {
            text: "partial".into(),
            aborted: true
        }))
    );
    assert!(h.instant.args.lock().unwrap().is_empty());
    assert!(events.contains(&tool_end("c1", "instant", true)));
    let transcript = h.transcript();
    assert_eq!(transcript.len(), 3);
    let answer = assistant(&transcript[1]);
    assert_eq!(answer.stop_reason, StopReason::Aborted);
    assert_eq!(crate::domain::message::text_of(&answer.content), "partial");
    assert_result(&transcript[2], "c1", SKIPPED_FOR_STOP, true);
    assert_paired(&transcript);
}

#[tokio::test(start_paused = true)]
async fn cancel_while_a_tool_runs_reaches_the_tool_and_skips_the_rest() {
    let h = Harness::new(vec![calls(&[("c1", "gate"), ("c2", "instant")])]);
    let run = h.start("go");
    h.gate.started.notified().await;
    run.cancel.cancel();
    let (outcome, _, _) = run.finish().await;
    assert_eq!(outcome.status, RunStatus::Aborted);
    assert!(h.gate.saw_cancel.load(Ordering::SeqCst));
    assert!(h.instant.args.lock().unwrap().is_empty());
    assert_eq!(h.provider.requests().len(), 1);
    let transcript = h.transcript();
    assert_result(&transcript[2], "c1", "gate cancelled", true);
    assert_result(&transcript[3], "c2", SKIPPED_FOR_STOP, true);
    assert_paired(&transcript);
}

#[tokio::test(start_paused = true)]
async fn the_run_timeout_ends_a_silent_model_with_an_error() {
    let mut h = Harness::new(vec![Script::Stall(Vec::new())]);
    Arc::get_mut(&mut h.agent).unwrap().run_timeout = Duration::from_secs(30);
    let started = tokio::time::Instant::now();
    let (outcome, events) = h.run("go").await;
    let RunStatus::Error(error) = &outcome.status else {
        panic!("expected an error, got {:?}", outcome.status);
    };
    let message = error.to_string();
    assert!(message.contains("timed out"), "{message}");
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert!(matches!(
        events.last(),
        Some(RunEvent::Lifecycle(Lifecycle::Error { message })) if message.contains("timed out")
    ));
    assert_paired(&h.transcript());
}

#[tokio::test(start_paused = true)]
async fn a_provider_error_fails_the_run_and_is_recorded() {
    let h = Harness::new(vec![Script::Refuse("boom".into())]);
    let (outcome, events) = h.run("go").await;
    let RunStatus::Error(error) = &outcome.status else {
        panic!("expected an error, got {:?}", outcome.status);
    };
    let message = error.to_string();
    assert!(
        message.contains("model error") && message.contains("boom"),
        "{message}"
    );
    assert_eq!(
        events.last(),
        Some(&RunEvent::Lifecycle(Lifecycle::Error {
            message: message.clone()
        }))
    );
    let transcript = h.transcript();
    let answer = assistant(&transcript[1]);
    assert_eq!(answer.stop_reason, StopReason::Error);
    assert!(answer.error_message.as_deref().unwrap().contains("boom"));
}

#[tokio::test(start_paused = true)]
async fn a_stream_breaking_after_a_call_fails_the_run_with_a_paired_transcript() {
    let h = Harness::new(vec![Script::BreakAfter(
        vec![call("c1", "instant")],
        "cut".into(),
    )]);
    let (outcome, _) = h.run("go").await;
    assert!(
        matches!(&outcome.status, RunStatus::Error(m) if m.to_string().contains("model error"))
    );
    assert!(h.instant.args.lock().unwrap().is_empty());
    let transcript = h.transcript();
    assert_eq!(assistant(&transcript[1]).stop_reason, StopReason::Error);
    assert_result(&transcript[2], "c1", SKIPPED_FOR_STOP, true);
    assert_paired(&transcript);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_tool_gets_an_error_result() {
    let h = Harness::new(vec![calls(&[("c1", "nope")]), text_reply(&["sorry"])]);
    let (outcome, _) = h.run("go").await;
    assert_eq!(outcome.status, RunStatus::Ok);
    let seen = &h.provider.requests()[1].messages;
    let (id, text, is_error) = result(&seen[2]);
    assert_eq!(id, "c1");
    assert!(is_error);
    assert!(text.contains("unknown tool: nope"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_model_that_always_calls_tools_is_stopped_by_the_call_guard() {
    let provider = Arc::new(FakeProvider {
        scripts: Mutex::new(VecDeque::new()),
        fallback: calls(&[("again", "instant")]),
        requests: Mutex::new(Vec::new()),
    });
    let h = Harness::with_provider(provider);
    let (outcome, _) = h.run("loop").await;
    assert!(
        matches!(&outcome.status, RunStatus::Error(m) if m.to_string().contains("kept calling tools")),
        "{:?}",
        outcome.status
    );
    assert_eq!(h.provider.requests().len(), MAX_MODEL_CALLS);
    assert_eq!(h.instant.args.lock().unwrap().len(), MAX_MODEL_CALLS);
    assert_paired(&h.transcript());
}

#[tokio::test(start_paused = true)]
async fn history_reaches_the_next_run_until_a_reset() {
    let h = Harness::new(vec![
        text_reply(&["one"]),
        text_reply(&["two"]),
        text_reply(&["three"]),
    ]);
    h.run("first").await;
    h.run("second").await;
    let seen = &h.provider.requests()[1].messages;
    let users: Vec<_> = seen.iter().filter_map(user_text).collect();
    assert_eq!(users, ["first", "second"]);
    assert_eq!(seen.len(), 3);
    assert_eq!(
        crate::domain::message::text_of(&assistant(&seen[1]).content),
        "one"
    );

    h.agent.store.append_reset(KEY, "/new").unwrap();
    h.run("third").await;
    let seen = &h.provider.requests()[2].messages;
    assert_eq!(seen.len(), 1);
    assert_eq!(user_text(&seen[0]).as_deref(), Some("third"));
}

#[tokio::test(start_paused = true)]
async fn the_tool_policy_hides_and_refuses_tools_the_profile_lacks() {
    let mut h = Harness::new(vec![calls(&[("c1", "instant")]), text_reply(&["ok"])]);
    let config: crate::config::Config = toml::from_str("[tools]\nprofile = \"minimal\"").unwrap();
    Arc::get_mut(&mut h.agent).unwrap().policy =
        crate::agent::policy::ToolPolicy::new(&config.tools);
    let (outcome, _) = h.run("go").await;
    assert_eq!(outcome.status, RunStatus::Ok);
    let requests = h.provider.requests();
    // Not offered: no tool list in the request or the prompt.
    assert!(requests[0].tools.is_empty());
    assert!(!requests[0].system.contains("## Tools"));
    // Called anyway: refused, and the tool never ran.
    let (id, text, is_error) = result(&requests[1].messages[2]);
    assert_eq!(id, "c1");
    assert!(is_error);
    assert!(text.contains("not allowed in this conversation"), "{text}");
    assert!(h.instant.args.lock().unwrap().is_empty());
}

/// A hook running `sh -c script` (real processes: these tests run on real time).
fn sh_hook(script: &str) -> crate::config::HookConfig {
    crate::config::HookConfig {
        command: vec!["sh".into(), "-c".into(), script.into()],
        ..Default::default()
    }
}

impl Harness {
    fn with_hooks(
        scripts: Vec<Script>,
        hooks: crate::config::HooksConfig,
        dir: &std::path::Path,
    ) -> Self {
        let mut h = Self::new(scripts);
        let agent = Arc::get_mut(&mut h.agent).unwrap();
        agent.hooks = crate::agent::hooks::Hooks::new(hooks, dir.to_path_buf());
        h
    }
}

#[tokio::test]
async fn a_blocked_tool_call_does_not_run_and_the_model_sees_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = crate::config::HooksConfig {
        before_tool: vec![crate::config::HookConfig {
            tools: vec!["instant".into()],
            ..sh_hook("cat > seen.json; echo 'not now' >&2; exit 2")
        }],
        after_tool: vec![sh_hook("touch after_tool_ran")],
        ..Default::default()
    };
    let h = Harness::with_hooks(
        vec![calls(&[("c1", "instant")]), text_reply(&["ok"])],
        hooks,
        dir.path(),
    );
    let (outcome, events) = h.run("use the tool").await;
    assert_eq!(outcome.status, RunStatus::Ok);
    assert!(h.instant.args.lock().unwrap().is_empty(), "the tool ran");
    assert!(events.contains(&tool_end("c1", "instant", true)));
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    assert_result(
        &requests[1].messages[2],
        "c1",
        "Blocked by hook: not now",
        true,
    );
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(
        seen,
        json!({"event": "before_tool", "session": KEY, "tool": "instant", "call_id": "c1",
               "arguments": {"id": "c1"}})
    );
    // A blocked call did not run, so nothing runs after it.
    assert!(!dir.path().join("after_tool_ran").exists());
    assert_paired(&h.transcript());
}

#[tokio::test]
async fn a_blocked_run_ends_with_the_reason_and_keeps_the_user_turn() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = crate::config::HooksConfig {
        before_run: vec![sh_hook("echo 'quiet hours' >&2; exit 2")],
        after_run: vec![sh_hook("cat > after_run.json")],
        ..Default::default()
    };
    let h = Harness::with_hooks(vec![text_reply(&["never"])], hooks, dir.path());
    let (outcome, events) = h.run("hi").await;
    let message = "blocked by hook: quiet hours".to_string();
    assert!(matches!(&outcome.status, RunStatus::Error(e) if e.to_string() == message));
    assert!(h.provider.requests().is_empty());
    assert_eq!(
        events.last(),
        Some(&RunEvent::Lifecycle(Lifecycle::Error {
            message: message.clone()
        }))
    );
    let transcript = h.transcript();
    assert_eq!(transcript.len(), 1);
    assert_eq!(user_text(&transcript[0]).as_deref(), Some("hi"));
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("after_run.json")).unwrap())
            .unwrap();
    assert_eq!(
        after,
        json!({"event": "after_run", "session": KEY, "status": "error", "text": "",
               "error": message})
    );
}

#[tokio::test]
async fn a_subagent_runs_under_its_parents_policy_without_spawning() {
    let mut h = Harness::new(vec![]);
    let config: crate::config::Config =
        toml::from_str("[tools]\ngroup_profile = \"coding\"").unwrap();
    Arc::get_mut(&mut h.agent).unwrap().policy =
        crate::agent::policy::ToolPolicy::new(&config.tools);
    let group = "agent:main:telegram:group:-100";
    let child = "agent:main:subagent:c1";
    let link = crate::store::SubagentLink {
        parent: group.into(),
        label: None,
        parent_target: None,
        created_ms: 1,
        state: crate::store::SubagentState::Running,
    };
    let turn = crate::store::PendingTurn {
        session_key: child.into(),
        inbound: chela_channel::Inbound {
            conversation: chela_channel::Conversation {
                channel: "subagent".into(),
                account: "default".into(),
                kind: chela_channel::ChatKind::Direct,
                chat_id: "c1".into(),
                thread_id: None,
            },
            sender: chela_channel::Sender {
                id: "chela".into(),
                name: "chela".into(),
                username: None,
            },
            message_id: "1".into(),
            text: "task".into(),
            reply_to: None,
            mentioned: true,
            timestamp_ms: 1,
            interaction: None,
            attachments: Vec::new(),
        },
        queued_ms: 1,
    };
    h.agent
        .store
        .spawn_subagent(child, &link, &turn)
        .await
        .unwrap();
    let parent = h.agent.allowed_for(group, None);
    let allowed = h.agent.allowed_for(child, None);
    assert!(parent.allows("exec") && parent.allows("sessions_spawn"));
    assert!(allowed.allows("exec") && !allowed.allows("sessions_spawn"));
    // Not a sub-agent: its own (direct) policy, which here is the full profile.
    assert!(h.agent.allowed_for(KEY, None).allows("message"));
    assert!(
        !allowed.allows("message"),
        "the group's coding profile has no message"
    );
}

#[tokio::test]
async fn an_isolated_jobs_run_follows_the_chat_it_answers_in_and_makes_no_jobs() {
    let mut h = Harness::new(vec![]);
    let config: crate::config::Config =
        toml::from_str("[tools]\nprofile = \"full\"\ngroup_profile = \"minimal\"").unwrap();
    Arc::get_mut(&mut h.agent).unwrap().policy =
        crate::agent::policy::ToolPolicy::new(&config.tools);
    let job = "agent:main:cron:digest";
    let chat = |kind| chela_channel::Conversation {
        channel: "telegram".into(),
        account: "default".into(),
        kind,
        chat_id: "-100".into(),
        thread_id: None,
    };
    let group = chat(chela_channel::ChatKind::Group);
    let in_group = h.agent.allowed_for(job, Some(&group));
    assert!(
        !in_group.allows("exec"),
        "a group's job gets the group profile"
    );
    let direct = chat(chela_channel::ChatKind::Direct);
    let in_dm = h.agent.allowed_for(job, Some(&direct));
    assert!(in_dm.allows("exec") && !in_dm.allows("cron"));
    assert!(
        h.agent.allowed_for(KEY, None).allows("cron"),
        "a chat's own run may"
    );
    assert!(
        !h.agent.allowed_for(job, None).allows("read"),
        "no chat: no tools"
    );
}
