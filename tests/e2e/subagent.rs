//! End-to-end, `sessions_spawn` with `runtime: "subagent"` through `chela chat`: the fake
//! model (told to call the tool) starts a child session; the tool returns at once, the child
//! runs chela's agent in its own session, and its result comes back to the parent as a
//! system message whose answer reaches the terminal. A nested spawn is refused, `/stop`
//! stops the children, and a kill -9 mid child run still delivers the follow-up once.

use crate::common;

use chela_testkit::{ChatSpec, UserSpec};
use common::telegram::{TgConfig, TgSetup};
use common::{KEY, Setup, count, last_user_text, messages, text_of, wait_until};

/// The child session key named in `text` (`agent:main:subagent:<uuid>`).
fn child_key(text: &str) -> String {
    let start = text.find("agent:main:subagent:").expect("a subagent key");
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == ':' || *c == '-')
        .collect()
}

/// The texts of a transcript's messages with `role` (`user`, `toolResult`), in order.
fn texts_of(entries: &[serde_json::Value], role: &str) -> Vec<String> {
    messages(entries)
        .into_iter()
        .filter(|m| m["role"] == role)
        .map(text_of)
        .collect()
}

/// The user texts of a transcript, in order.
fn user_texts(entries: &[serde_json::Value]) -> Vec<String> {
    texts_of(entries, "user")
}

/// Waits until the fake model was asked with `text` as the last user text.
async fn wait_asked(s: &Setup, text: &str) {
    wait_until(&format!("a model call for {text:?}"), || {
        s.model_calls().iter().any(|b| last_user_text(b) == text)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_result_comes_back_as_a_system_message_and_nesting_is_refused() {
    let s = Setup::openai("followup").await;
    let mut chat = s.chat();
    let nested = r#"tool sessions_spawn {"task": "deeper"}"#;
    let spawn = serde_json::json!({"task": nested, "label": "nester"});
    chat.send(&format!("tool sessions_spawn {spawn}")).await;
    // The tool returned at once: the parent's own answer quotes its short result.
    let first = chat
        .wait_for("Its result will arrive as a system message.")
        .await;
    assert!(
        first.contains("done: Started subagent nester (session agent:main:subagent:"),
        "{first}"
    );
    let child = child_key(&first);
    // The child's end reaches the parent as a system message; the parent's answer is shown.
    // A sub-agent is not offered sessions_spawn, and its call is refused.
    let follow = chat
        .wait_for("The tool sessions_spawn is not allowed in this conversation (tool policy).")
        .await;
    assert!(
        follow.contains(&format!(
            "ok: [System message] Subagent \"nester\" ({child}) finished:"
        )),
        "{follow}"
    );
    chat.send("tool sessions_list {}").await;
    chat.wait_for("done: ").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // parent: spawn + answer, child: refused spawn + answer, parent: follow-up, list + answer.
    assert_eq!(s.fake.request_count(), 7);

    // The child's transcript is its own: its task, the refused spawn, its answer.
    let child_entries = s.export(&child).await;
    assert_eq!(user_texts(&child_entries), [nested]);
    let refused = texts_of(&child_entries, "toolResult");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("not allowed in this conversation (tool policy)"),
        "{refused:?}"
    );

    // The parent's: the spawn, the system message, the list; never the child's task turn.
    let parent = s.export(KEY).await;
    let users = user_texts(&parent);
    assert_eq!(users.len(), 3, "{users:?}");
    assert!(users[1].starts_with(&format!(
        "[System message] Subagent \"nester\" ({child}) finished:\n\ndone: The tool sessions_spawn is not allowed"
    )));
    assert!(!users.iter().any(|u| u == nested), "{users:?}");
    // sessions_list shows the child with its parent.
    let results = texts_of(&parent, "toolResult");
    let list = results.last().unwrap();
    assert!(
        list.contains(&format!("{child} — "))
            && list.contains(&format!("subagent of {KEY} (done)")),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_in_the_parent_stops_its_running_subagent() {
    let s = Setup::openai("followup").await;
    let mut chat = s.chat();
    chat.send(r#"tool sessions_spawn {"task": "slow 200 100", "label": "long"}"#)
        .await;
    chat.wait_for("done: Started subagent long").await;
    wait_asked(&s, "slow 200 100").await;
    chat.send("/stop").await;
    chat.wait_for("Stopped 1 subagent(s).").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // No system message: the user asked for everything to stop.
    assert!(!done.stdout.contains("[System message]"), "{}", done.stdout);
    assert!(!done.stdout.contains("tick 100"), "{}", done.stdout);
    let users = user_texts(&s.export(KEY).await);
    assert_eq!(users.len(), 1, "{users:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_during_the_child_run_still_delivers_the_follow_up_once() {
    let s = Setup::openai("followup").await;
    let mut chat = s.chat();
    chat.send(r#"tool sessions_spawn {"task": "slow 150 20", "label": "slowpoke"}"#)
        .await;
    // The parent answers at once: its child is still working (and is cut below). The line
    // ends when the reply is done, so the parent's turn is settled before the kill.
    chat.wait_for("Its result will arrive as a system message.\n")
        .await;
    wait_asked(&s, "slow 150 20").await;
    let cut = chat.kill().await;
    assert!(!cut.contains("[System message]"), "{cut}");

    // Restart with nothing typed: the child's turn is recovered, runs again, and its result
    // reaches the parent, whose answer is printed before chat exits.
    let second = s.chat().finish().await;
    assert!(second.status.success(), "{}", second.stderr);
    let ticks: String = (1..=20).map(|i| format!("tick {i} ")).collect();
    assert_eq!(
        count(
            &second.stdout,
            "ok: [System message] Subagent \"slowpoke\" (agent:main:subagent:"
        ),
        1,
        "{}",
        second.stdout
    );
    assert!(
        second.stdout.contains(ticks.trim_end()),
        "{}",
        second.stdout
    );

    // A third start finds nothing left to do.
    let third = s.chat().finish().await;
    assert!(third.status.success(), "{}", third.stderr);
    assert!(
        !third.stdout.contains("[System message]"),
        "{}",
        third.stdout
    );
    let users = user_texts(&s.export(KEY).await);
    let reports = users
        .iter()
        .filter(|u| u.starts_with("[System message]"))
        .count();
    assert_eq!(reports, 1, "{users:?}");
    let status = s.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("pending turns: 0"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_agent_waits_for_its_subagent_and_answers_the_system_message() {
    let s = Setup::openai("followup").await;
    let (status, json) = s
        .agent_json(r#"tool sessions_spawn {"task": "add 2 and 2"}"#)
        .await;
    assert!(status.success(), "{json}");
    // The last run of the session is the answer to the child's result.
    let text = json["text"].as_str().unwrap();
    assert!(
        text.starts_with("ok: [System message] Subagent \"add 2 and 2\" (agent:main:subagent:"),
        "{text}"
    );
    assert!(text.ends_with("finished:\n\nok: add 2 and 2"), "{text}");
    let users = user_texts(&s.export(KEY).await);
    assert_eq!(users.len(), 2, "{users:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_telegram_group_the_parents_answer_to_the_result_reaches_the_chat() {
    const GROUP: i64 = -1_001_777_000_009;
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "group_policy = \"open\"\nrequire_mention = false",
        // Groups get no tools by default: this one may spawn.
        tables: "[tools]\ngroup_profile = \"coding\"",
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(ChatSpec::group(GROUP, "Team"));
    let mut gw = s.gateway();
    let asked = s.tg.user_sends(
        ChatSpec::group(GROUP, "Team"),
        UserSpec::new(7, "Ann"),
        r#"tool sessions_spawn {"task": "summarize", "label": "grp"}"#,
    );
    // Whole, not a preview of it: the answer is streamed into one message and edited.
    gw.wait(&s, "the parent's answer to the system message", |s| {
        s.texts(GROUP).iter().any(|t| {
            t.starts_with("ok: [System message] Subagent &quot;grp&quot;")
                && t.ends_with("ok: summarize")
        })
    })
    .await;
    let sent = s.sent(GROUP);
    assert_eq!(sent.len(), 2, "{sent:?}");
    // Sent as HTML (quotes escaped). The tool's answer quotes the user's message; the
    // follow-up has nothing to quote.
    assert!(
        sent[0].text.starts_with("done: Started subagent grp"),
        "{sent:?}"
    );
    assert_eq!(sent[0].reply_to, Some(asked));
    assert!(
        sent[1].text.ends_with("finished:\n\nok: summarize"),
        "{sent:?}"
    );
    assert_eq!(sent[1].reply_to, None);
    gw.stop().await;
}
