//! End-to-end thinking levels and shown reasoning (docs/models.md): `/think` sets the
//! session's level (kept across restarts), which each wire format asks for its own way
//! (Anthropic's thinking budget with the tool loop's signed thinking sent back, OpenAI's
//! `reasoning_effort`, the Responses API's `reasoning.effort`); `/reasoning on` shows the
//! reasoning in the chat, apart from the answer, which it otherwise never enters.

use crate::common;

use common::telegram::{TgSetup, dm};
use common::{KEY, Provider, Setup};

/// The model calls' bodies, in order (any wire format).
fn bodies(setup: &Setup) -> Vec<serde_json::Value> {
    setup.fake.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinks_through_a_tool_loop_and_the_level_survives_a_restart() {
    let setup = Setup::start(Provider::Anthropic, "steer", 200, "").await;
    let mut chat = setup.chat();
    chat.send("/think high").await;
    chat.wait_for("Thinking: high (this conversation's; default off)")
        .await;
    // A tool call after reasoning: the tool loop's next call must carry the signed block
    // (the fake refuses it otherwise, as the API does).
    chat.send("think tool read {\"path\": \"missing.txt\"}")
        .await;
    chat.wait_for("done: ").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(
        !done.stdout.contains("Let me think"),
        "reasoning stays out: {}",
        done.stdout
    );
    let calls = bodies(&setup);
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(
        calls[0]["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 24000})
    );
    assert_eq!(calls[0]["max_tokens"], 4096 + 24000);
    let looped = &calls[1]["messages"].as_array().unwrap()[1]["content"][0];
    assert_eq!(looped["type"], "thinking");
    assert_eq!(looped["signature"], "sig-1");
    assert_eq!(
        looped["thinking"],
        "Let me think about tool read {\"path\": \"missing.txt\"}."
    );
    // The transcript keeps the reasoning with its signature (pi's field name).
    let entries = setup.export(KEY).await;
    let kept = entries.iter().any(|e| {
        e["message"]["content"][0]["type"] == "thinking"
            && e["message"]["content"][0]["thinkingSignature"] == "sig-1"
    });
    assert!(kept, "{entries:#?}");

    // A new process: the level holds; `/think off` turns it off again.
    let mut chat = setup.chat();
    chat.send("hello").await;
    chat.wait_for("ok: hello").await;
    chat.send("/think off").await;
    chat.wait_for("Thinking: off").await;
    chat.send("again").await;
    chat.wait_for("ok: again").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let calls = bodies(&setup);
    assert_eq!(calls[2]["thinking"]["budget_tokens"], 24000);
    assert!(calls[3].get("thinking").is_none(), "{:#}", calls[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_and_the_responses_api_ask_for_their_effort() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "thinking = \"low\"").await;
    let mut chat = setup.chat();
    chat.send("/think").await;
    chat.wait_for("Thinking: low").await;
    chat.send("one").await;
    chat.wait_for("ok: one").await;
    chat.send("/think medium").await;
    chat.wait_for("Thinking: medium").await;
    chat.send("two").await;
    chat.wait_for("ok: two").await;
    chat.send("/think nonsense").await;
    chat.wait_for("Unknown level nonsense.").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let calls = bodies(&setup);
    assert_eq!(calls[0]["reasoning_effort"], "low");
    assert_eq!(calls[1]["reasoning_effort"], "medium");

    // The same fake server through the Responses API: text, a tool loop, reasoning.
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "").await;
    let config = std::fs::read_to_string(setup.config()).unwrap();
    let config = config.replace("provider = \"openai\"", "provider = \"responses\"");
    std::fs::write(setup.config(), config).unwrap();
    let mut chat = setup.chat();
    chat.send("/think high").await;
    chat.wait_for("Thinking: high").await;
    chat.send("/reasoning on").await;
    chat.wait_for("Reasoning: shown").await;
    chat.send("think tool read {\"path\": \"missing.txt\"}")
        .await;
    chat.wait_for("done: ").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(done.stdout.contains("💭 Reasoning"), "{}", done.stdout);
    let calls = bodies(&setup);
    assert!(
        calls.iter().all(|c| c["reasoning"]["effort"] == "high"),
        "{calls:#?}"
    );
    assert_eq!(calls[0]["store"], false);
    let input = calls[1]["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    // The reasoning item went back before the call it led to (encrypted: `store` is false).
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "enc-1");
    assert_eq!(input[2]["call_id"], input[3]["call_id"]);
    assert_eq!(
        calls[0]["include"],
        serde_json::json!(["reasoning.encrypted_content"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shown_reasoning_comes_before_the_answer_in_a_collapsed_message() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat.clone(), ann.clone(), "think quietly");
    gw.wait(&s, "the first answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: quietly")
    })
    .await;
    s.tg.user_sends(chat.clone(), ann.clone(), "/reasoning on");
    gw.wait(&s, "the switch", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.starts_with("Reasoning: shown"))
    })
    .await;
    s.tg.user_sends(chat, ann, "think aloud");
    gw.wait(&s, "the second answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: aloud")
    })
    .await;
    gw.stop().await;
    let texts = s.texts(42);
    let shown: Vec<&String> = texts
        .iter()
        .filter(|t| t.contains("Let me think"))
        .collect();
    assert_eq!(
        shown.len(),
        1,
        "reasoning shown once, only when asked: {texts:#?}"
    );
    assert!(shown[0].contains("Let me think about aloud."), "{texts:#?}");
    let reasoning_at = texts
        .iter()
        .position(|t| t.contains("Let me think"))
        .unwrap();
    let answer_at = texts.iter().position(|t| t == "ok: aloud").unwrap();
    assert!(reasoning_at < answer_at, "{texts:#?}");
    // Sent as an expandable quote, which Telegram shows collapsed.
    let html =
        s.tg.calls()
            .iter()
            .filter_map(|c| c.body["text"].as_str().map(str::to_owned))
            .find(|t| t.contains("Let me think about aloud."))
            .unwrap();
    assert!(html.contains("<blockquote expandable>"), "{html}");
}
