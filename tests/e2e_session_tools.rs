//! End-to-end, the `message`, `sessions_list` and `sessions_history` tools through
//! `chela chat` (the fake model calls them on request).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{KEY, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_messages_the_chat_and_reads_sessions() {
    let s = Setup::openai("followup").await;
    let mut chat = s.chat();
    chat.send(r#"tool message {"text": "a progress note"}"#)
        .await;
    chat.wait_for("a progress note").await;
    chat.wait_for(&format!("done: sent to {KEY}")).await;

    chat.send(r#"tool sessions_list {}"#).await;
    let out = chat.wait_for("done: ").await;
    chat.wait_for(" entries, active").await;
    assert!(!out.contains("error"), "{out}");

    chat.send(&format!(
        r#"tool sessions_history {{"key": "{KEY}", "limit": 50}}"#
    ))
    .await;
    chat.wait_for("done: user: tool message").await;

    chat.send(r#"tool message {"text": "x", "target": "agent:main:nowhere"}"#)
        .await;
    chat.wait_for("unknown session").await;
    chat.finish().await;
}
