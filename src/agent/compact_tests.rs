//! Compaction tests: the split point (pairs kept together, the newest turn kept), the token
//! estimate, and runs that compact, fail to compact, or are forced to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::agent::compact::*;
use crate::agent::provider::{BoxFuture, EventStream, ProviderError};
use crate::agent::run::RunStatus;
use crate::agent::tools::{Tool, ToolContext, ToolOutput};
use crate::domain::message::{AssistantMessage, ToolCall, Usage, now_ms};
use crate::domain::message::{ContentBlock, text_of};
use crate::store::SUMMARY_HEADING;
use crate::store::{Entry, Store};

const KEY: &str = "agent:main:compact";

fn user(text: &str) -> Message {
    Message::user(text)
}

fn assistant(text: &str, calls: &[&str]) -> Message {
    let mut content = vec![ContentBlock::text(text)];
    content.extend(calls.iter().map(|id| {
        ContentBlock::ToolCall(ToolCall {
            id: (*id).into(),
            name: "instant".into(),
            arguments: json!({}),
        })
    }));
    Message::Assistant(AssistantMessage {
        content,
        provider: "test".into(),
        model: "m".into(),
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        timestamp: now_ms(),
    })
}

fn result(id: &str) -> Message {
    let call = ToolCall {
        id: id.into(),
        name: "instant".into(),
        arguments: json!({}),
    };
    Message::tool_result(&call, "out", false)
}

fn summary() -> Message {
    user(&format!("{SUMMARY_HEADING}\nearlier"))
}

#[test]
fn split_keeps_recent_turns_within_the_budget() {
    let w = [
        user("u1"),
        assistant("a1", &[]),
        user("u2"),
        assistant("a2", &[]),
        user("u3"),
        assistant("a3", &[]),
    ];
    let turn = message_tokens(&w[0]) + message_tokens(&w[1]);
    assert_eq!(split_point(&w, 2 * turn), Some(2));
    assert_eq!(split_point(&w, turn), Some(4));
    // Nothing fits: only the newest turn is kept.
    assert_eq!(split_point(&w, 0), Some(4));
    // Everything fits: still at least the first turn is summarized.
    assert_eq!(split_point(&w, u64::MAX), Some(2));
}

#[test]
fn split_never_separates_a_call_from_its_result() {
    // A user message between a call and its result (as a steer could leave it) is no split.
    let w = [
        user("u1"),
        assistant("", &["c1"]),
        user("steer"),
        result("c1"),
        assistant("a", &[]),
        user("u2"),
        assistant("a2", &[]),
    ];
    assert_eq!(split_point(&w, 0), Some(5));
    let w = [
        user("u1"),
        assistant("", &["c1"]),
        user("steer"),
        result("c1"),
    ];
    assert_eq!(split_point(&w, 0), None);
}

#[test]
fn split_needs_something_before_the_newest_turn() {
    assert_eq!(split_point(&[], 0), None);
    assert_eq!(split_point(&[user("only")], 0), None);
    let w = [
        user("u"),
        assistant("", &["c"]),
        result("c"),
        assistant("a", &[]),
    ];
    assert_eq!(split_point(&w, 0), None);
    // The summary alone is not worth summarizing again.
    assert_eq!(
        split_point(&[summary(), user("u"), assistant("a", &[])], 0),
        None
    );
    assert_eq!(
        split_point(&[summary(), user("u"), assistant("a", &[]), user("v")], 0),
        Some(3)
    );
}

#[test]
fn estimate_uses_the_last_report_after_the_summary_only() {
    let mut reported = assistant("a", &[]);
    if let Message::Assistant(a) = &mut reported {
        a.usage.input = 1000;
        a.usage.cache_read = 500;
    }
    let w = vec![user("u"), reported.clone(), user("v")];
    let since = message_tokens(&w[1]) + message_tokens(&w[2]);
    assert_eq!(estimate_prompt(7, &w), 1500 + since);
    // A report older than the summary counted history that is gone: estimate everything.
    let mut s = summary();
    if let Message::User(u) = &mut s {
        u.timestamp = now_ms() + 60_000;
    }
    let w = vec![s, reported, user("v")];
    let all: u64 = w.iter().map(message_tokens).sum();
    assert_eq!(estimate_prompt(7, &w), 7 + all);
    assert_eq!(tokens_of_chars(0), 0);
    assert_eq!(tokens_of_chars(5), 2);
}

#[test]
fn summary_input_quotes_roles_and_clips_long_text() {
    let long = "x".repeat(10_000);
    let w = [
        user("hello"),
        assistant("hi", &["c1"]),
        result("c1"),
        user(&long),
    ];
    let text = summary_input(&w, 100_000);
    assert!(text.starts_with("<conversation>\n[user]: hello\n[assistant]: hi\n"));
    assert!(text.contains("[assistant calls instant]: {}\n[instant result]: out\n"));
    assert!(text.contains("[... 6000 of 10000 chars left out ...]"));
    assert!(text.ends_with(SUMMARY_INSTRUCTION));
    let short = summary_input(&w, 10);
    assert!(short.chars().count() < text.chars().count());
}

/// One step of a random window.
#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Text(usize),
    /// An assistant message with this many calls, then their results.
    Tools(usize),
    /// As `Tools`, with a user message between the calls and their results.
    SteeredTools(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..300).prop_map(Step::User),
        (0usize..300).prop_map(Step::Text),
        (1usize..4).prop_map(Step::Tools),
        (1usize..3).prop_map(Step::SteeredTools),
    ]
}

fn build(with_summary: bool, steps: &[Step]) -> Vec<Message> {
    let mut out = Vec::new();
    if with_summary {
        out.push(summary());
    }
    let mut n = 0;
    for s in steps {
        match s {
            Step::User(len) => out.push(user(&"u".repeat(*len))),
            Step::Text(len) => out.push(assistant(&"a".repeat(*len), &[])),
            Step::Tools(k) | Step::SteeredTools(k) => {
                let ids: Vec<String> = (0..*k)
                    .map(|_| {
                        n += 1;
                        format!("c{n}")
                    })
                    .collect();
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                out.push(assistant("", &refs));
                if matches!(s, Step::SteeredTools(_)) {
                    out.push(user("steer"));
                }
                out.extend(ids.iter().map(|id| result(id)));
            }
        }
    }
    out
}

/// True when a call before `cut` has its result at or after it.
fn splits_a_pair(w: &[Message], cut: usize) -> bool {
    w[cut..].iter().any(|m| match m {
        Message::ToolResult(r) => w[..cut].iter().any(|a| match a {
            Message::Assistant(a) => a
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolCall(c) if c.id == r.tool_call_id)),
            _ => false,
        }),
        _ => false,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn split_never_splits_a_pair_nor_drops_the_newest_turn(
        with_summary in any::<bool>(),
        steps in prop::collection::vec(step(), 0..40),
        keep in 0u64..2_000,
    ) {
        let w = build(with_summary, &steps);
        let first = usize::from(with_summary);
        let last_user = w.iter().rposition(|m| matches!(m, Message::User(_)));
        let valid = |i: usize| {
            i > first && matches!(w[i], Message::User(_)) && !splits_a_pair(&w, i)
                && last_user.is_some_and(|l| i <= l)
        };
        match split_point(&w, keep) {
            Some(cut) => {
                prop_assert!(valid(cut), "cut {cut} of {w:?}");
                prop_assert!(!splits_a_pair(&w, cut));
                // The newest user message is kept.
                prop_assert!(last_user.is_some_and(|l| cut <= l));
                // The earliest valid cut whose tail fits wins, else the latest valid one.
                let tail = |i: usize| w[i..].iter().map(message_tokens).sum::<u64>();
                let best = (0..w.len()).filter(|&i| valid(i)).find(|&i| tail(i) <= keep)
                    .or_else(|| (0..w.len()).rev().find(|&i| valid(i)));
                prop_assert_eq!(Some(cut), best);
            }
            None => prop_assert!((0..w.len()).all(|i| !valid(i))),
        }
    }
}

/// Answers `ok: <last user text>`, a call to `instant` for `tool`, `done` after a tool
/// result, and `SUMMARY of <n> lines` to summary requests (or fails them).
struct TestModel {
    fail_summary: bool,
    report_usage: bool,
    requests: Mutex<Vec<ProviderRequest>>,
}

impl TestModel {
    fn new(fail_summary: bool, report_usage: bool) -> Arc<Self> {
        Arc::new(TestModel {
            fail_summary,
            report_usage,
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ProviderRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn chat_requests(&self) -> Vec<ProviderRequest> {
        let all = self.requests();
        all.into_iter()
            .filter(|r| r.system != SUMMARY_SYSTEM)
            .collect()
    }
}

impl Provider for TestModel {
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
        let chars = request.system.len() + serde_json::to_string(&request.messages).unwrap().len();
        let usage = Usage {
            input: if self.report_usage {
                chars as u64 / 4
            } else {
                0
            },
            ..Usage::default()
        };
        let done = |stop_reason| ProviderEvent::Done { stop_reason, usage };
        let last_user = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(u) => Some(text_of(&u.content)),
                _ => None,
            })
            .unwrap_or_default();
        let events = if request.system == SUMMARY_SYSTEM {
            if self.fail_summary {
                return Box::pin(async { Err(ProviderError::Stream("summary refused".into())) });
            }
            assert!(
                request.tools.is_empty(),
                "a summary request offers no tools"
            );
            let lines = last_user.lines().count();
            vec![
                ProviderEvent::TextDelta(format!("SUMMARY of {lines} lines")),
                done(StopReason::Stop),
            ]
        } else if matches!(request.messages.last(), Some(Message::ToolResult(_))) {
            vec![
                ProviderEvent::TextDelta("done".into()),
                done(StopReason::Stop),
            ]
        } else if last_user.starts_with("tool") {
            let n = self.requests.lock().unwrap().len();
            vec![
                ProviderEvent::ToolCall(ToolCall {
                    id: format!("call{n}"),
                    name: "instant".into(),
                    arguments: json!({}),
                }),
                done(StopReason::ToolUse),
            ]
        } else {
            vec![
                ProviderEvent::TextDelta(format!("ok: {last_user}")),
                done(StopReason::Stop),
            ]
        };
        Box::pin(async move {
            let stream: EventStream =
                Box::pin(futures_util::stream::iter(events.into_iter().map(Ok)));
            Ok(stream)
        })
    }
}

struct Instant;

impl Tool for Instant {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "instant".into(),
            description: "answers at once".into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok("instant output ".repeat(10)) })
    }
}

fn agent(model: Arc<TestModel>, context_window: u64, reserve_tokens: u64) -> Agent {
    Agent {
        provider: model,
        tools: vec![Arc::new(Instant)],
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
        compaction: CompactionSettings {
            context_window,
            reserve_tokens,
        },
        hooks: Default::default(),
        memory: Default::default(),
    }
}

async fn run(agent: &Agent, text: &str) -> (RunStatus, Vec<RunEvent>) {
    let (outcome, seen) = crate::agent::test_support::run_collecting(agent, KEY, text).await;
    (outcome.status, seen)
}

fn compactions(store: &Store) -> Vec<(String, String)> {
    store
        .entries(KEY)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Item(item) => match item.kind {
                EntryKind::Compaction {
                    first_kept_entry_id,
                    ..
                } => Some((item.id, first_kept_entry_id)),
                _ => None,
            },
            Entry::Session(_) => None,
        })
        .collect()
}

fn stored_user_texts(store: &Store) -> Vec<String> {
    store
        .entries(KEY)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Item(item) => match item.kind {
                EntryKind::Message(Message::User(u)) => Some(text_of(&u.content)),
                _ => None,
            },
            Entry::Session(_) => None,
        })
        .collect()
}

/// Every tool result of a request follows the call it answers, in the same request.
fn assert_request_paired(request: &ProviderRequest) {
    let m = &request.messages;
    for (i, r) in m.iter().enumerate() {
        if let Message::ToolResult(r) = r {
            let called = m[..i].iter().any(|a| match a {
                Message::Assistant(a) => a
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolCall(c) if c.id == r.tool_call_id)),
                _ => false,
            });
            assert!(
                called,
                "result {} without its call in {m:?}",
                r.tool_call_id
            );
        }
    }
}

async fn long_session(report_usage: bool) {
    let model = TestModel::new(false, report_usage);
    let agent = agent(model.clone(), 1_500, 300);
    let mut texts = Vec::new();
    let mut compaction_events = 0;
    for i in 0..40 {
        let text = if i % 5 == 3 {
            format!("tool {i}")
        } else {
            format!("message {i}: {}", "words ".repeat(20))
        };
        let (status, events) = run(&agent, &text).await;
        assert_eq!(status, RunStatus::Ok, "turn {i}");
        compaction_events += events
            .iter()
            .filter(|e| matches!(e, RunEvent::Compaction(_)))
            .count();
        texts.push(text);
    }
    let done = compactions(&agent.store);
    assert!(done.len() >= 2, "{done:?}");
    assert_eq!(compaction_events, done.len());
    // History is kept whole.
    assert_eq!(stored_user_texts(&agent.store), texts);
    // Every prompt stayed inside the window, kept its pairs and ended with the newest text.
    let base = base_tokens("you are a test", &[Instant.spec()]);
    let chats = model.chat_requests();
    for r in &chats {
        assert!(base + r.messages.iter().map(message_tokens).sum::<u64>() <= 1_500);
        assert_request_paired(r);
    }
    let last = chats.last().unwrap();
    assert!(is_summary(&last.messages[0]), "{:?}", last.messages[0]);
    assert!(
        text_of(match &last.messages[0] {
            Message::User(u) => &u.content,
            _ => unreachable!(),
        })
        .contains("SUMMARY of")
    );
    assert_eq!(
        last.messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(u) => Some(text_of(&u.content)),
                _ => None,
            })
            .unwrap(),
        texts[39]
    );
    // The window after the last compaction is summary, kept entries, newer entries.
    let window = agent.store.window_entries(KEY).unwrap();
    assert_eq!(window[0].entry_id, None);
    let (_, first_kept) = done.last().unwrap();
    assert_eq!(window[1].entry_id.as_ref(), Some(first_kept));
    assert!(matches!(window[1].message, Message::User(_)));
}

#[tokio::test]
async fn a_long_session_compacts_and_keeps_its_history_with_reported_usage() {
    long_session(true).await;
}

#[tokio::test]
async fn a_long_session_compacts_and_keeps_its_history_on_estimates_alone() {
    long_session(false).await;
}

/// Fills the session with turns until the estimated next prompt exceeds `tokens`.
fn fill(agent: &Agent, tokens: u64) {
    agent.store.ensure_session(KEY, "/").unwrap();
    let base = agent.base_tokens();
    let mut i = 0;
    loop {
        let mut window = agent.store.window(KEY).unwrap();
        window.push(user("next"));
        if estimate_prompt(base, &window) > tokens {
            return;
        }
        i += 1;
        agent
            .store
            .append_message(KEY, &user(&format!("old {i} {}", "w ".repeat(40))))
            .unwrap();
        agent
            .store
            .append_message(KEY, &assistant("fine", &[]))
            .unwrap();
    }
}

#[tokio::test]
async fn a_failed_summary_goes_on_while_the_prompt_fits() {
    let model = TestModel::new(true, false);
    let agent = agent(model.clone(), 1_000, 200);
    fill(&agent, 850);
    // Over the threshold but inside the window: one summary attempt, then the run goes on
    // uncompacted (through its tool round too, without asking again).
    let (status, events) = run(&agent, "tool next").await;
    assert_eq!(status, RunStatus::Ok);
    assert!(!events.iter().any(|e| matches!(e, RunEvent::Compaction(_))));
    let summaries = model.requests().len() - model.chat_requests().len();
    assert_eq!(summaries, 1);
    assert_eq!(model.chat_requests().len(), 2);
    assert!(compactions(&agent.store).is_empty());
}

#[tokio::test]
async fn a_failed_summary_fails_the_run_when_the_prompt_does_not_fit() {
    let model = TestModel::new(true, false);
    let agent = agent(model.clone(), 1_000, 200);
    fill(&agent, 1_100);
    let (status, _) = run(&agent, "next").await;
    assert_eq!(
        status,
        RunStatus::Error(crate::domain::run::RunError::ContextTooLong)
    );
    assert!(model.chat_requests().is_empty());
    // The turn is kept in the transcript.
    assert_eq!(stored_user_texts(&agent.store).last().unwrap(), "next");
}

#[tokio::test]
async fn forced_compaction_keeps_only_the_newest_turn_and_folds_earlier_summaries() {
    let model = TestModel::new(false, true);
    let agent = agent(model.clone(), 128_000, 20_000);
    let cancel = CancellationToken::new();
    assert!(agent.compact(KEY, 0, &cancel).await.unwrap().is_none());
    for i in 0..4 {
        assert_eq!(run(&agent, &format!("m{i}")).await.0, RunStatus::Ok);
    }
    let done = agent.compact(KEY, 0, &cancel).await.unwrap().unwrap();
    assert_eq!(done.summarized, 6);
    assert!(done.tokens_after < done.tokens_before, "{done:?}");
    let window = agent.store.window(KEY).unwrap();
    assert_eq!(window.len(), 3);
    assert!(is_summary(&window[0]));
    assert_eq!(
        text_of(match &window[1] {
            Message::User(u) => &u.content,
            _ => unreachable!(),
        }),
        "m3"
    );
    // Nothing before the newest turn but the summary: nothing to do.
    assert!(agent.compact(KEY, 0, &cancel).await.unwrap().is_none());
    run(&agent, "m4").await;
    let again = agent.compact(KEY, 0, &cancel).await.unwrap().unwrap();
    assert_eq!(again.summarized, 3);
    let last_summary = model.requests().last().unwrap().clone();
    assert_eq!(last_summary.system, SUMMARY_SYSTEM);
    let input = text_of(match &last_summary.messages[0] {
        Message::User(u) => &u.content,
        _ => unreachable!(),
    });
    assert!(input.contains(SUMMARY_HEADING), "{input}");
    assert_eq!(compactions(&agent.store).len(), 2);
    assert_eq!(
        stored_user_texts(&agent.store),
        ["m0", "m1", "m2", "m3", "m4"]
    );
}

#[tokio::test]
async fn a_cancelled_summary_appends_nothing() {
    let model = TestModel::new(false, true);
    let agent = agent(model, 128_000, 20_000);
    for i in 0..3 {
        run(&agent, &format!("m{i}")).await;
    }
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(matches!(
        agent.compact(KEY, 0, &cancel).await,
        Err(CompactError::Cancelled)
    ));
    assert!(compactions(&agent.store).is_empty());
}
