//! The pre-compaction memory flush in real runs with a scripted model: it runs before the
//! summary, may call `write`, is not delivered nor kept, and runs once per cycle.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::agent::compact::{CompactionSettings, SUMMARY_SYSTEM};
use crate::agent::memory::*;
use crate::agent::provider::{BoxFuture, EventStream, Provider, ProviderError};
use crate::agent::run::RunStatus;
use crate::domain::events::RunEvent;
use crate::domain::message::text_of;
use crate::store::{Entry, EntryKind, Store};

const KEY: &str = "agent:main:memflush";

/// Summary requests get `SUMMARY`; flush requests call `write` once, then answer
/// `NO_REPLY`; chat requests get `ok: <text>`. Each request's kind is recorded.
struct Model {
    fail_summary: bool,
    today: String,
    kinds: Mutex<Vec<&'static str>>,
    requests: Mutex<Vec<ProviderRequest>>,
}

impl Model {
    fn new(fail_summary: bool) -> Arc<Model> {
        Arc::new(Model {
            fail_summary,
            today: crate::config::MemoryConfig::default().today(),
            kinds: Mutex::default(),
            requests: Mutex::default(),
        })
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.kinds.lock().unwrap().clone()
    }
}

impl Provider for Model {
    fn name(&self) -> &str {
        "test"
    }

    fn model(&self) -> &str {
        "test-1"
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        self.requests.lock().unwrap().push(request.clone());
        let last_user = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(u) => Some(text_of(&u.content)),
                _ => None,
            })
            .unwrap_or_default();
        let done = |stop_reason| ProviderEvent::Done {
            stop_reason,
            usage: Usage::default(),
        };
        let (kind, events) = if request.system == SUMMARY_SYSTEM {
            if self.fail_summary {
                self.kinds.lock().unwrap().push("summary");
                return Box::pin(async { Err(ProviderError::Stream("no summary".into())) });
            }
            let events = vec![
                ProviderEvent::TextDelta("SUMMARY".into()),
                done(StopReason::Stop),
            ];
            ("summary", events)
        } else if last_user.starts_with("Pre-compaction memory flush") {
            let events = if matches!(request.messages.last(), Some(Message::ToolResult(_))) {
                vec![
                    ProviderEvent::TextDelta(NO_REPLY.into()),
                    done(StopReason::Stop),
                ]
            } else {
                vec![
                    ProviderEvent::ToolCall(ToolCall {
                        id: "flush1".into(),
                        name: "write".into(),
                        arguments: json!({
                            "path": format!("memory/{}.md", self.today),
                            "content": "- Dana prefers tea\n"
                        }),
                    }),
                    done(StopReason::ToolUse),
                ]
            };
            ("flush", events)
        } else {
            let events = vec![
                ProviderEvent::TextDelta(format!("ok: {last_user}")),
                done(StopReason::Stop),
            ];
            ("chat", events)
        };
        self.kinds.lock().unwrap().push(kind);
        Box::pin(async move {
            let stream: EventStream =
                Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}

fn agent(model: Arc<Model>, workspace: &std::path::Path, flush: bool) -> Agent {
    let mut tools = crate::agent::tools::builtin_tools();
    tools.extend(crate::agent::tools::memory::tools());
    let config = crate::config::MemoryConfig {
        flush,
        ..Default::default()
    };
    Agent {
        provider: model,
        tools,
        specs: Default::default(),
        system_prompt: "you are a test".into(),
        skill_names: Vec::new(),
        mcp: None,
        policy: Default::default(),
        approver: Default::default(),
        id: "main".into(),
        store: Store::temporary().unwrap(),
        tool_context: crate::agent::tools::test_support::ctx(workspace),
        run_timeout: Duration::from_secs(600),
        max_tokens: 1000,
        pricing: Default::default(),
        thinking: Default::default(),
        prompt_cache: false,
        vision: crate::config::Vision::Auto,
        shutdown: Default::default(),
        compaction: CompactionSettings {
            context_window: 6_000,
            reserve_tokens: 1_000,
        },
        hooks: Default::default(),
        memory: MemorySettings::new(&config),
    }
}

/// Fills the session with old turns until the next prompt is estimated above `tokens`.
fn fill(agent: &Agent, tokens: u64) {
    agent.store.ensure_session(KEY, "/").unwrap();
    let base = agent.base_tokens();
    let mut i = 0;
    loop {
        let mut window = agent.store.window(KEY).unwrap();
        window.push(Message::user("next"));
        if estimate_prompt(base, &window) > tokens {
            return;
        }
        i += 1;
        let old = Message::user(format!("old {i} {}", "w ".repeat(40)));
        agent.store.append_message(KEY, &old).unwrap();
        let answer = Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("fine")],
            provider: "test".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: now_ms(),
        });
        agent.store.append_message(KEY, &answer).unwrap();
    }
}

async fn run(agent: &Agent, text: &str) -> (RunStatus, String, Vec<RunEvent>) {
    let (outcome, seen) = crate::agent::test_support::run_collecting(agent, KEY, text).await;
    (outcome.status, outcome.text, seen)
}

fn stored_texts(store: &Store) -> String {
    let mut out = String::new();
    for entry in store.entries(KEY).unwrap() {
        if let Entry::Item(item) = entry
            && let EntryKind::Message(m) = item.kind
        {
            out.push_str(&serde_json::to_string(&m).unwrap());
        }
    }
    out
}

#[tokio::test]
async fn the_flush_runs_before_the_summary_may_write_and_is_not_delivered() {
    let ws = tempfile::tempdir().unwrap();
    let model = Model::new(false);
    let agent = agent(model.clone(), ws.path(), true);
    // A short session compacts nothing and flushes nothing.
    let (status, _, _) = run(&agent, "hello").await;
    assert_eq!(status, RunStatus::Ok);
    assert_eq!(model.kinds(), ["chat"]);
    fill(&agent, 5_200);
    let (status, text, events) = run(&agent, "next").await;
    assert_eq!(status, RunStatus::Ok);
    assert_eq!(text, "ok: next");
    // The flush (a write, then NO_REPLY) comes before the summary and the answer.
    assert_eq!(model.kinds(), ["chat", "flush", "flush", "summary", "chat"]);
    let note = ws.path().join(format!("memory/{}.md", model.today));
    assert_eq!(
        std::fs::read_to_string(note).unwrap(),
        "- Dana prefers tea\n"
    );
    assert!(events.iter().any(|e| matches!(e, RunEvent::Compaction(_))));
    // Nothing of it reaches the chat or the transcript.
    for e in &events {
        if let RunEvent::Assistant { delta } = e {
            assert!(!delta.contains(NO_REPLY), "{delta}");
        }
        if let RunEvent::Tool(t) = e {
            panic!("a flush tool event was sent: {t:?}");
        }
    }
    let stored = stored_texts(&agent.store);
    assert!(!stored.contains(NO_REPLY) && !stored.contains("Pre-compaction"));
    assert!(!stored.contains("Dana prefers tea"));
    // The flush saw the whole window, was offered the file and memory tools only, and the
    // memory section names today's note.
    let requests = model.requests.lock().unwrap().clone();
    let flush = &requests[1];
    assert!(flush.system.contains(FLUSH_SYSTEM));
    assert!(flush.system.contains(&format!("memory/{}.md", model.today)));
    let offered: Vec<&str> = flush.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        offered,
        ["read", "ls", "write", "edit", "memory_search", "memory_get"]
    );
    assert!(flush.messages.len() > 10, "{}", flush.messages.len());
}

#[tokio::test]
async fn the_flush_runs_once_per_compaction_cycle() {
    let ws = tempfile::tempdir().unwrap();
    // The summary fails, so the cycle does not end: the next run does not flush again.
    let model = Model::new(true);
    let agent = agent(model.clone(), ws.path(), true);
    fill(&agent, 5_200);
    for text in ["one", "two"] {
        let (status, _, _) = run(&agent, text).await;
        assert_eq!(status, RunStatus::Ok);
    }
    let flushes = model.kinds().iter().filter(|k| **k == "flush").count();
    assert_eq!(
        flushes,
        2,
        "one flush turn (two calls): {:?}",
        model.kinds()
    );
    assert_eq!(model.kinds().iter().filter(|k| **k == "summary").count(), 2);
}

#[tokio::test]
async fn no_flush_when_turned_off_or_when_the_run_cannot_write() {
    let ws = tempfile::tempdir().unwrap();
    let model = Model::new(false);
    let agent = agent(model.clone(), ws.path(), false);
    fill(&agent, 5_200);
    run(&agent, "next").await;
    assert_eq!(model.kinds(), ["summary", "chat"]);

    let model = Model::new(false);
    let mut agent = self::agent(model.clone(), ws.path(), true);
    let tools: crate::config::ToolsConfig = toml::from_str("deny = [\"write\", \"edit\"]").unwrap();
    agent.policy = crate::agent::policy::ToolPolicy::new(&tools);
    fill(&agent, 5_200);
    run(&agent, "next").await;
    assert_eq!(model.kinds(), ["summary", "chat"]);
    assert!(!ws.path().join("memory").exists());
}

#[tokio::test]
async fn compact_asked_for_flushes_first_once_per_cycle_even_below_the_threshold() {
    let ws = tempfile::tempdir().unwrap();
    let model = Model::new(false);
    let agent = agent(model.clone(), ws.path(), true);
    let cancel = CancellationToken::new();
    // One turn: nothing to summarize, so no flush.
    run(&agent, "hello").await;
    assert!(
        agent
            .flush_before_command_compaction(KEY, &cancel)
            .await
            .is_none()
    );
    // Far below the automatic threshold, `/compact` still flushes first.
    let below = agent.base_tokens() + 600;
    assert!(below < 4_000, "{below}");
    fill(&agent, below);
    let done = agent.flush_before_command_compaction(KEY, &cancel).await;
    assert_eq!(
        done.map(|d| d.tools),
        Some(vec!["write".to_owned()]),
        "{:?}",
        model.kinds()
    );
    let note = ws.path().join(format!("memory/{}.md", model.today));
    assert_eq!(
        std::fs::read_to_string(note).unwrap(),
        "- Dana prefers tea\n"
    );
    // Not twice in the same cycle; the compaction that follows starts a new one.
    assert!(
        agent
            .flush_before_command_compaction(KEY, &cancel)
            .await
            .is_none()
    );
    agent.compact(KEY, 0, &cancel).await.unwrap().unwrap();
    run(&agent, "more").await;
    assert!(
        agent
            .flush_before_command_compaction(KEY, &cancel)
            .await
            .is_some()
    );
    // Turned off: none.
    let off = self::agent(Model::new(false), ws.path(), false);
    fill(&off, below);
    assert!(
        off.flush_before_command_compaction(KEY, &cancel)
            .await
            .is_none()
    );
}
