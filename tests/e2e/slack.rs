//! End-to-end, Slack through `chela gateway` against the fake Slack (Socket Mode and the Web
//! API): a DM streamed into one message, a channel mention answered in a thread that goes on
//! without mentions, a redelivered event answered once, a 429 waited out, files both ways,
//! slash commands answered privately, reactions and pins, pairing, `chela doctor`, and a
//! refused app token. The catch-up after a restart: `slack_catch_up.rs`.

use std::time::Duration;

use chela_testkit::slack::{ChannelSpec, FakeSlack, UserSpec};
use serde_json::json;

use crate::common;
use common::slack::{SlSetup, stop};

pub(crate) fn ann() -> UserSpec {
    UserSpec::new("U1", "ann").display_name("Ann")
}

pub(crate) fn bob() -> UserSpec {
    UserSpec::new("U2", "bob")
}

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n)
        .map(|i| format!("tick {i} "))
        .collect::<String>()
        .trim_end()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_streams_into_one_message_acknowledged_once_stored() {
    let s = SlSetup::open().await;
    let gw = s.gateway().await;
    let dm = ChannelSpec::im("U1");
    s.slack.user_sends(&dm, &ann(), "slow 300 6");
    let want = ticks(6);
    s.wait("the whole answer", |s| {
        s.sent("DU1").iter().any(|m| m.text.trim_end() == want)
    })
    .await;
    stop(gw).await;

    let sent = s.sent("DU1");
    assert_eq!(sent.len(), 1, "one message: {sent:#?}");
    assert_eq!(sent[0].thread_ts, None, "a DM's answer is not threaded");
    assert!(sent[0].edits >= 1, "previewed, then edited: {sent:#?}");
    for text in &sent[0].edit_history {
        assert!(
            want.starts_with(text.trim_end()),
            "{text:?} is not a prefix"
        );
    }
    // The bot's own messages came back as events and were not taken.
    assert_eq!(s.asked(), ["slow 300 6"], "asked once");
    assert!(
        s.slack.pending_envelopes().is_empty(),
        "every event acknowledged"
    );
    assert!(!s.slack.acks().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_mention_is_answered_in_a_thread_that_goes_on_without_mentions() {
    let s = SlSetup::open().await;
    let gw = s.gateway().await;
    let general = ChannelSpec::public("C1", "general");
    let first = s.slack.user_sends(
        &general,
        &ann(),
        "<@UBOT> verbatim **bold** and [docs](https://e.x/a) a<b",
    );
    s.wait("the answer in a thread", |s| !s.sent("C1").is_empty())
        .await;
    let answer = &s.sent("C1")[0];
    assert_eq!(
        answer.thread_ts.as_deref(),
        Some(first.as_str()),
        "answered under the mention"
    );
    assert_eq!(
        answer.text, "*bold* and <https://e.x/a|docs> a&lt;b",
        "Markdown became mrkdwn"
    );

    s.slack
        .user_sends(&general, &bob(), "just chatting, no mention");
    s.slack
        .user_replies(&general, &ann(), &first, "second in the thread");
    s.wait("the thread's second answer", |s| s.sent("C1").len() == 2)
        .await;
    stop(gw).await;

    let sent = s.sent("C1");
    assert_eq!(sent[1].thread_ts.as_deref(), Some(first.as_str()));
    assert_eq!(sent[1].text, "ok: second in the thread");
    let asked = s.asked();
    assert_eq!(
        asked.len(),
        2,
        "the unmentioned top-level message is not answered: {asked:#?}"
    );
    let second = serde_json::to_string(&s.setup.model_calls()[1]).unwrap();
    assert!(
        second.contains("verbatim **bold**"),
        "one session per thread: {second}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_app_token_stops_the_slack_channel_and_is_named() {
    let s = SlSetup::open().await;
    let text = std::fs::read_to_string(s.setup.config())
        .unwrap()
        .replace(FakeSlack::APP_TOKEN, "xapp-not-this-app");
    std::fs::write(s.setup.config(), text).unwrap();
    let mut cmd = s.setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "warn,chela_slack=info");
    let gw = common::Chat::spawn(cmd);
    let line = gw.wait_stderr_line("channel ended with an error").await;
    assert!(
        line.contains("channels.slack.app_token") && line.contains("invalid_auth"),
        "{line}"
    );
    assert_eq!(s.slack.connections_opened(), 0, "Socket Mode never started");
    assert!(!s.slack.connected());
    stop(gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_and_a_rate_limited_post_are_answered_once() {
    let s = SlSetup::open().await;
    let gw = s.gateway().await;
    // Slack sends an event again when its acknowledgement is late.
    s.slack.set_ack_timeout(Duration::from_millis(1));
    s.slack.inject_429("chat.postMessage", 1, 1);
    let dm = ChannelSpec::im("U1");
    s.slack.user_sends(&dm, &ann(), "only once");
    s.wait("the answer", |s| !s.sent("DU1").is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop(gw).await;

    let retried = s
        .slack
        .envelopes_sent()
        .iter()
        .any(|e| e["retry_attempt"].as_u64() >= Some(1));
    assert!(
        retried,
        "the fake sent the event again: {:#?}",
        s.slack.envelopes_sent()
    );
    assert_eq!(s.asked(), ["only once"], "dedupe drops the redelivery");
    assert_eq!(s.sent("DU1").len(), 1);
    assert_eq!(s.sent("DU1")[0].text, "ok: only once");
    assert_eq!(
        s.slack.rate_limited_count(),
        1,
        "the 429 was met and waited out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_come_in_with_the_bot_token_and_go_out_through_the_upload() {
    let s = SlSetup::open().await;
    std::fs::create_dir_all(s.setup.path("ws")).unwrap();
    std::fs::write(s.setup.path("ws/report.txt"), "the report").unwrap();
    let gw = s.gateway().await;
    let dm = ChannelSpec::im("U1");
    s.slack.user_sends_file(
        &dm,
        &ann(),
        "read this",
        "notes.txt",
        "text/plain",
        b"hello file".to_vec(),
    );
    s.wait("the answer to the file", |s| !s.sent("DU1").is_empty())
        .await;
    assert_eq!(
        s.slack.downloads().len(),
        1,
        "downloaded once, with the bot token"
    );
    let asked = serde_json::to_string(&s.setup.model_calls()[0]).unwrap();
    assert!(asked.contains("notes.txt"), "{asked}");

    let call = json!({"text": "here it is", "attachments": ["report.txt"]});
    s.slack
        .user_sends(&dm, &ann(), &format!("tool message {call}"));
    s.wait("the file sent", |s| {
        s.sent("DU1").iter().any(|m| !m.files.is_empty())
    })
    .await;
    stop(gw).await;

    let with_file = s
        .sent("DU1")
        .into_iter()
        .find(|m| !m.files.is_empty())
        .unwrap();
    let (id, name) = &with_file.files[0];
    assert_eq!(name, "report.txt");
    assert_eq!(s.slack.uploaded(id).as_deref(), Some(&b"the report"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_answer_privately_and_actions_react_and_pin() {
    let s = SlSetup::open().await;
    let gw = s.gateway().await;
    let dm = ChannelSpec::im("U1");
    s.slack.user_sends(&dm, &ann(), "hello");
    s.wait("the first answer", |s| s.sent("DU1").len() == 1)
        .await;
    let n = s.slack.user_runs_command(&dm, &ann(), "/new", "");
    s.wait("the command's private answer", |s| {
        !s.slack.responses(n).is_empty()
    })
    .await;
    let answer = &s.slack.responses(n)[0];
    assert!(
        answer["text"].as_str().unwrap().contains("New session"),
        "{answer}"
    );
    assert_eq!(answer["response_type"], "ephemeral");

    let asked = s.slack.user_sends(&dm, &ann(), r#"tools [{"name":"message","arguments":{"action":"react","emoji":"👍"}},{"name":"message","arguments":{"action":"pin"}}]"#);
    s.wait("the reaction and the pin", |s| {
        !s.slack.reactions("DU1", &asked).is_empty() && !s.slack.pinned("DU1").is_empty()
    })
    .await;
    stop(gw).await;
    assert_eq!(s.slack.reactions("DU1", &asked), ["+1"]);
    assert_eq!(s.slack.pinned("DU1"), [asked]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_pairs_before_reaching_the_model_and_doctor_knows_the_bot() {
    let s = SlSetup::with("").await;
    let (ok, doctor) = s.cli(&["doctor"]).await;
    assert!(doctor.contains("@chela in Fake"), "{doctor}");
    let _ = ok;
    let gw = s.gateway().await;
    let dm = ChannelSpec::im("U9");
    let zed = UserSpec::new("U9", "zed").display_name("Zed Z");
    s.slack.user_sends(&dm, &zed, "let me in");
    s.wait("the pairing code", |s| !s.sent("DU9").is_empty())
        .await;
    let prompt = s.sent("DU9")[0].text.clone();
    let code: String = prompt
        .split("chela pairing approve slack ")
        .nth(1)
        .unwrap_or_else(|| panic!("no approve command in {prompt:?}"))
        .chars()
        .take(8)
        .collect();
    assert!(s.asked().is_empty(), "a stranger never reaches the model");
    let (ok, list) = s.cli(&["pairing", "list"]).await;
    assert!(
        ok && list.contains("Zed Z"),
        "the name Slack shows (users.info): {list}"
    );
    let (ok, out) = s.cli(&["pairing", "approve", "slack", &code]).await;
    assert!(ok, "{out}");
    s.wait("the waiting message answered", |s| {
        s.sent("DU9").iter().any(|m| m.text == "ok: let me in")
    })
    .await;
    stop(gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_token_that_is_not_one_is_named() {
    let s = SlSetup::open().await;
    let text = std::fs::read_to_string(s.setup.config())
        .unwrap()
        .replace(FakeSlack::APP_TOKEN, "xoxb-wrong-kind");
    std::fs::write(s.setup.config(), text).unwrap();
    let out = s.setup.run(&["gateway"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("channels.slack.app_token"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_channel_only_a_workspace_admin_resets_the_threads_session() {
    let s = SlSetup::open().await;
    let gw = s.gateway().await;
    let general = ChannelSpec::public("C1", "general");
    let admin = UserSpec::new("U3", "cleo").admin();
    let top = s.slack.user_sends(&general, &bob(), "<@UBOT> hello");
    s.wait("the first answer", |s| s.sent("C1").len() == 1)
        .await;
    s.slack.user_replies(&general, &bob(), &top, "<@UBOT> /new");
    s.slack.user_replies(&general, &admin, &top, "<@UBOT> /new");
    s.wait("the admin's reset", |s| s.sent("C1").len() >= 2)
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop(gw).await;
    let sent = s.sent("C1");
    // A member's /new is refused quietly in a channel; the admin's resets the thread.
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(
        sent[1].text.contains("New session"),
        "an admin may: {:?}",
        sent[1].text
    );
    assert_eq!(sent[1].thread_ts.as_deref(), Some(top.as_str()));
    assert_eq!(s.asked().len(), 1, "no command reached the model");
}
