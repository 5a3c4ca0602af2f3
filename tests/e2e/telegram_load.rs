//! End-to-end, Telegram under stress through `chela gateway`: kill -9 mid-run and restart, a
//! burst of 50 messages in collect mode, and 429 storms on sends and edits.

use crate::common;

use common::count;
use common::telegram::{TgConfig, TgSetup, dm};

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n).map(|i| format!("tick {i} ")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_kill_9_is_answered_once_after_restart() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "slow 200 20");
    gw.wait(&s, "the first preview", |s| !s.texts(42).is_empty())
        .await;
    // Once the preview was edited, its message is surely journaled (the reply notes a new
    // message before it goes on).
    let first = s.texts(42);
    gw.wait(&s, "an edit of the preview", |s| s.texts(42) != first)
        .await;
    gw.kill().await;
    let stale = s.texts(42);
    assert_eq!(stale.len(), 1, "{stale:#?}");

    let full = ticks(20);
    let want = full.trim_end();
    let mut gw = s.gateway();
    gw.wait(&s, "the complete answer", |s| {
        s.texts(42).iter().any(|t| t.trim_end() == want)
    })
    .await;
    gw.stop().await;

    // The killed process's partial preview was taken back (deleted) at the restart, and the
    // rerun sent the complete answer as a new message: one message in the chat, the answer once.
    let texts = s.texts(42);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert_eq!(texts[0].trim_end(), want);
    let deleted: Vec<_> = s.tg.sent(42).into_iter().filter(|m| m.deleted).collect();
    assert_eq!(deleted.len(), 1, "{deleted:#?}");
    assert!(full.starts_with(deleted[0].text.trim_end()), "{deleted:#?}");
    assert_eq!(count(&texts.concat(), "tick 20"), 1, "{texts:#?}");
    // The update was run twice at most: once cut by the kill, once to the end.
    let asked = s.asked();
    assert_eq!(
        asked.iter().filter(|t| *t == "slow 200 20").count(),
        2,
        "{asked:#?}"
    );
    assert_eq!(asked.len(), 2, "{asked:#?}");

    let (ok, status) = s.cli(&["status"]).await;
    assert!(ok, "{status}");
    assert!(status.contains("pending turns: 0"), "{status}");
    assert!(status.contains("undelivered replies: 0"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_50_messages_in_collect_mode_is_merged_and_fully_answered() {
    let s = TgSetup::with(TgConfig {
        mode: "collect",
        debounce_ms: 300,
        queue: "cap = 100\n",
        telegram: "allow_from = [\"42\"]",
        ..TgConfig::default()
    })
    .await;
    let items: Vec<String> = (0..50).map(|i| format!("item-{i:02}.")).collect();
    let (chat, ann) = dm(42, "Ann");
    // All 50 are waiting before the gateway's first poll.
    for item in &items {
        s.tg.user_sends(chat.clone(), ann.clone(), &format!("note {item}"));
    }
    let mut gw = s.gateway();
    let all_answered = |s: &TgSetup| {
        let texts = s.texts(42).concat();
        items.iter().all(|i| texts.contains(i.as_str()))
    };
    gw.wait(&s, "every item answered", all_answered).await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    let asked = s.asked();
    assert!(
        asked.len() <= 5,
        "{} model requests: {asked:#?}",
        asked.len()
    );
    assert!(
        asked
            .iter()
            .any(|t| t.starts_with("[Queued messages while agent was busy]")),
        "{asked:#?}"
    );
    let all_asked = asked.concat();
    let texts = s.texts(42);
    let all_sent = texts.concat();
    for item in &items {
        assert_eq!(count(&all_asked, item), 1, "{item} in {asked:#?}");
        assert_eq!(count(&all_sent, item), 1, "{item} in {texts:#?}");
    }
    // One reply per request, each delivered.
    assert_eq!(texts.len(), asked.len(), "{texts:#?}");
    assert!(texts.iter().all(|t| t.starts_with("ok: ")), "{texts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_over_five_chats_delivers_every_reply_once() {
    let s = TgSetup::new("dm_policy = \"open\"").await;
    s.tg.enforce_rate_limits(true);
    s.tg.inject_429(5, 1);
    let mut gw = s.gateway();
    let users: Vec<i64> = (101..=105).collect();
    for &id in &users {
        let (chat, user) = dm(id, &format!("U{id}"));
        s.tg.user_sends(chat, user, &format!("hello from {id}"));
    }
    gw.wait(&s, "five replies", |s| {
        users.iter().all(|&id| !s.texts(id).is_empty())
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    for &id in &users {
        assert_eq!(
            s.texts(id),
            vec![format!("ok: hello from {id}")],
            "chat {id}"
        );
    }
    // The five injected 429s were answered and the sends retried.
    let sends = s.tg.call_count("sendMessage");
    assert!(
        sends >= 10,
        "{sends} sendMessage calls for 5 replies and 5 refusals"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followup_replies_in_one_chat_arrive_once_and_in_order_under_429s() {
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "allow_from = [\"42\"]",
        ..TgConfig::default()
    })
    .await;
    s.tg.enforce_rate_limits(true);
    s.tg.inject_429(5, 1);
    let (chat, ann) = dm(42, "Ann");
    let mut gw = s.gateway();
    // A streamed answer first, so previews and edits meet the 429s too.
    s.tg.user_sends(chat.clone(), ann.clone(), "slow 300 6");
    for i in 1..=4 {
        s.tg.user_sends(chat.clone(), ann.clone(), &format!("message {i}"));
    }
    gw.wait(&s, "the last reply", |s| {
        s.texts(42).iter().any(|t| t == "ok: message 4")
    })
    .await;
    gw.wait(&s, "the first reply", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.trim_end() == ticks(6).trim_end())
    })
    .await;
    gw.stop().await;

    let texts: Vec<String> = s
        .texts(42)
        .iter()
        .map(|t| t.trim_end().to_owned())
        .collect();
    let mut want = vec![ticks(6).trim_end().to_owned()];
    want.extend((1..=4).map(|i| format!("ok: message {i}")));
    assert_eq!(texts, want);
    let calls = s.tg.calls();
    let attempts = calls
        .iter()
        .filter(|c| c.method == "sendmessage" || c.method == "editmessagetext")
        .count();
    let edits: usize = s.sent(42).iter().map(|m| m.edits).sum();
    // Every accepted call made a message or an edit; the rest were 429s.
    assert!(
        attempts >= 5 + edits + 5,
        "{attempts} sends/edits for 5 messages and {edits} edits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_answer_survives_a_429() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    s.tg.inject_429(1, 1);
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "/whoami");
    gw.wait(&s, "the /whoami answer", |s| {
        s.texts(42).iter().any(|t| t.starts_with("You are Ann"))
    })
    .await;
    gw.stop().await;
}
