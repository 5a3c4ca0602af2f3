//! End-to-end, the `message`, `sessions_list` and `sessions_history` tools through
//! `chela chat` (the fake model calls them on request), and what they reach of other
//! people's conversations through `chela gateway` on a fake Telegram.

use crate::common;

use common::telegram::{Gateway, TgConfig, TgSetup, dm};
use common::{KEY, Setup, assert_paired, text_of};

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

/// Ann (Telegram 42) is an owner; Bob (43) is allowed to talk to the bot, no more.
const ANN: i64 = 42;
const BOB: i64 = 43;
const ANN_KEY: &str = "agent:main:telegram:direct:42";
const BOB_KEY: &str = "agent:main:telegram:direct:43";

/// Both allowed in DMs, Ann the owner; `tables` are appended (e.g. a `[tools]` table).
async fn two_users(tables: &str) -> TgSetup {
    TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\", \"43\"]",
        tables: &format!("[commands]\nowner_allow_from = [\"telegram:42\"]\n{tables}"),
        ..TgConfig::default()
    })
    .await
}

/// A turn whose model lists the sessions, reads session `key` and posts `text` into it.
fn reach_into(key: &str, text: &str) -> String {
    format!(
        r#"tools [{{"name": "sessions_list", "arguments": {{}}}}, {{"name": "sessions_history", "arguments": {{"key": "{key}"}}}}, {{"name": "message", "arguments": {{"text": "{text}", "target": "{key}"}}}}]"#
    )
}

/// The results of the tool calls of session `key`'s transcript: (is error, text), in order.
async fn tool_results(s: &TgSetup, key: &str) -> Vec<(bool, String)> {
    let entries = s.setup.export(key).await;
    assert_paired(&entries)
        .into_iter()
        .map(|(_, result)| (result["isError"] == true, text_of(&result)))
        .collect()
}

/// Sends `text` as `user` in their DM and waits for a bot message there containing `answer`.
async fn say(s: &TgSetup, gw: &mut Gateway, user: i64, text: &str, answer: &str) {
    let name = if user == ANN { "Ann" } else { "Bob" };
    let (chat, from) = dm(user, name);
    s.tg.user_sends(chat, from, text);
    gw.wait(s, answer, |s| {
        s.texts(user).iter().any(|t| t.contains(answer))
    })
    .await;
}

/// Ann says hello; then Bob's run tries to post "bob was here" into Ann's chat.
async fn ann_then_bob_reaches_into_her_chat(s: &TgSetup, gw: &mut Gateway) {
    say(s, gw, ANN, "hello from ann", "ok: hello from ann").await;
    say(s, gw, BOB, &reach_into(ANN_KEY, "bob was here"), "done: ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owners_run_neither_reads_nor_posts_into_the_owners_chat_but_the_owners_may() {
    let s = two_users("").await;
    let mut gw = s.gateway();
    ann_then_bob_reaches_into_her_chat(&s, &mut gw).await;
    // Nothing reached Ann's chat, and Bob's run learnt why.
    assert_eq!(s.texts(ANN), ["ok: hello from ann"]);
    let bob = s.texts(BOB).join("\n");
    assert!(bob.contains("not your conversation"), "{bob}");

    // The owner's run reaches Bob's session and chat.
    say(
        &s,
        &mut gw,
        ANN,
        &reach_into(BOB_KEY, "ann was here"),
        "done: ",
    )
    .await;
    gw.wait(&s, "Ann's message in Bob's chat", |s| {
        s.texts(BOB).iter().any(|t| t == "ann was here")
    })
    .await;
    gw.stop().await;

    let results = tool_results(&s, BOB_KEY).await;
    assert_eq!(results.len(), 3, "{results:?}");
    let (listed_error, listed) = &results[0];
    assert!(!listed_error && listed.contains(BOB_KEY), "{listed}");
    assert!(
        !listed.contains(ANN_KEY),
        "Bob's list shows Ann's session: {listed}"
    );
    for (error, text) in &results[1..] {
        assert!(*error, "{text}");
        assert!(text.starts_with("not your conversation"), "{text}");
        assert!(!text.contains("hello from ann"), "{text}");
    }
    let results = tool_results(&s, ANN_KEY).await;
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].1.contains(BOB_KEY), "{results:?}");
    assert!(results[1].1.contains("user: tools ["), "{results:?}");
    assert!(!results.iter().any(|(error, _)| *error), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_operator_opens_the_sessions_a_non_owners_run_reaches_them() {
    let s = two_users("[tools]\nsessions = \"all\"\n").await;
    let mut gw = s.gateway();
    ann_then_bob_reaches_into_her_chat(&s, &mut gw).await;
    gw.wait(&s, "Bob's message in Ann's chat", |s| {
        s.texts(ANN).iter().any(|t| t == "bob was here")
    })
    .await;
    gw.stop().await;
    let results = tool_results(&s, BOB_KEY).await;
    assert!(!results.iter().any(|(error, _)| *error), "{results:?}");
    assert!(results[0].1.contains(ANN_KEY), "{results:?}");
    assert!(results[1].1.contains("user: hello from ann"), "{results:?}");
}
