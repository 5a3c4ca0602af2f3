//! End-to-end: compaction through the real binary with a small context window. A long
//! session keeps working, the transcript keeps every message plus `compaction` entries, and
//! the prompts after a compaction are smaller and start with the summary.

use crate::common;

use common::{KEY, Provider, Setup, assert_paired, last_user_text, messages, text_of};
use serde_json::Value;

/// The context window of these tests, in tokens (the fake model counts body chars / 4; the
/// system prompt and tool schemas alone take about 2,400 of them, a turn about 200), so
/// the session compacts every few turns.
const WINDOW: u64 = 4_500;
/// Tokens kept free.
const RESERVE: u64 = 500;

async fn setup(window: u64, reserve: u64) -> Setup {
    let s = Setup::start(
        Provider::OpenAi,
        "steer",
        200,
        &format!("context_window = {window}"),
    )
    .await;
    let config = std::fs::read_to_string(s.config()).unwrap();
    let config = config.replace(
        "[agent]\n",
        &format!("[agent]\ncompaction_reserve_tokens = {reserve}\n"),
    );
    // The memory flush before a compaction is sent at the uncompacted size (memory.rs and
    // the agent's memory tests cover it); these tests check every prompt against the window.
    let config = format!("{config}[memory]\nflush = false\n");
    std::fs::write(s.config(), config).unwrap();
    s
}

fn is_summary_request(body: &Value) -> bool {
    last_user_text(body).contains("<conversation>")
}

fn first_message_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let first = messages.iter().find(|m| m["role"] != "system").unwrap();
    text_of(first)
}

/// Every `tool` message of a Chat Completions body answers a call made earlier in it.
fn assert_request_paired(body: &Value) {
    let mut called = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            called.push(call["id"].as_str().unwrap().to_string());
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap();
            assert!(
                called.iter().any(|c| c == id),
                "result {id} without its call"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_compacts_and_keeps_every_message() {
    let s = setup(WINDOW, RESERVE).await;
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(8);
    let mut sent = Vec::new();
    for i in 0..30 {
        let text = if i % 7 == 4 {
            "tool ls {}".to_string()
        } else {
            format!("turn {i}: {filler}")
        };
        let (status, json) = s.agent_json(&text).await;
        assert!(status.success(), "turn {i}: {json}");
        assert_eq!(json["status"], "ok", "turn {i}: {json}");
        sent.push(text);
    }

    let entries = s.export(KEY).await;
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert!(!compactions.is_empty(), "no compaction entry");
    for c in &compactions {
        assert!(
            c["summary"].as_str().unwrap().starts_with("summary: "),
            "{c}"
        );
        assert!(
            c["tokensBefore"].as_u64().unwrap() > WINDOW - RESERVE,
            "{c}"
        );
        // The first kept entry is an earlier user message.
        let kept = entries
            .iter()
            .position(|e| e["id"] == c["firstKeptEntryId"])
            .expect("firstKeptEntryId names an entry");
        let at = entries.iter().position(|e| e["id"] == c["id"]).unwrap();
        assert!(kept < at);
        assert_eq!(entries[kept]["message"]["role"], "user");
    }
    // History is never rewritten: every message is still there, in order, and paired.
    let msgs = messages(&entries);
    let users: Vec<String> = msgs
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(m))
        .collect();
    assert_eq!(users, sent);
    let answers = msgs
        .iter()
        .filter(|m| m["role"] == "assistant" && m["stopReason"] == "stop")
        .count();
    assert_eq!(answers, 30);
    assert_paired(&entries);
    for pair in entries[1..].windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }

    let calls = s.model_calls();
    let summaries: Vec<&Value> = calls.iter().filter(|b| is_summary_request(b)).collect();
    assert_eq!(summaries.len(), compactions.len());
    for body in &summaries {
        assert!(
            body.get("tools").is_none(),
            "a summary request offers no tools"
        );
    }
    let first_summary = calls.iter().position(is_summary_request).unwrap();
    let history_chars: usize = msgs.iter().map(|m| text_of(m).len()).sum();
    let chats_after: Vec<&Value> = calls[first_summary..]
        .iter()
        .filter(|b| !is_summary_request(b))
        .collect();
    assert!(!chats_after.is_empty());
    for body in &chats_after {
        let first = first_message_text(body);
        assert!(
            first.starts_with("[Summary of earlier conversation]\nsummary: "),
            "{first}"
        );
        // Smaller than the uncompacted history would be (its texts alone, without framing).
        let sent_chars = serde_json::to_string(&body["messages"]).unwrap().len();
        assert!(
            sent_chars < history_chars,
            "{sent_chars} >= {history_chars}"
        );
    }
    for body in calls.iter().filter(|b| !is_summary_request(b)) {
        assert_request_paired(body);
        // Every prompt stayed inside the window (the fake counts chars / 4).
        let tokens = serde_json::to_string(body).unwrap().len() as u64 / 4;
        assert!(tokens <= WINDOW, "{tokens} tokens");
    }
    let last = calls.iter().rev().find(|b| !is_summary_request(b)).unwrap();
    assert_eq!(last_user_text(last), sent[29]);

    // Export -> import -> export with compaction entries is byte-identical.
    let a = s.path("a.jsonl");
    let b = s.path("b.jsonl");
    let (a_arg, b_arg) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = s.run(&["sessions", "export", KEY, "--out", a_arg]).await;
    assert!(out.status.success(), "{out:?}");
    let copy = "agent:main:main";
    let out = s.run(&["sessions", "import", copy, "--in", a_arg]).await;
    assert!(out.status.success(), "{out:?}");
    let out = s.run(&["sessions", "export", copy, "--out", b_arg]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_compact_summarizes_all_but_the_newest_turn() {
    let s = setup(128_000, 20_000).await;
    let mut chat = s.chat();
    chat.send("/compact").await;
    chat.wait_for("Nothing to compact yet.").await;
    for i in 0..3 {
        chat.send(&format!("hello {i}")).await;
        chat.wait_for(&format!("ok: hello {i}\n")).await;
    }
    chat.send("/compact").await;
    chat.wait_for("Compacted: 4 earlier messages summarized")
        .await;
    chat.send("after").await;
    chat.wait_for("ok: after\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);

    let calls = s.model_calls();
    assert!(is_summary_request(&calls[3]));
    let last = calls.last().unwrap();
    assert_eq!(
        first_message_text(last),
        "[Summary of earlier conversation]\nsummary: 4 lines of conversation"
    );
    let texts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(text_of)
        .collect();
    assert_eq!(
        texts[1..],
        ["hello 2", "ok: hello 2", "after"].map(String::from)
    );
    let entries = s.export(KEY).await;
    assert_eq!(
        entries.iter().filter(|e| e["type"] == "compaction").count(),
        1
    );
    assert_eq!(messages(&entries).len(), 8);
}
