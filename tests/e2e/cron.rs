//! End-to-end, schedules and the heartbeat through `chela gateway` and the fake Telegram:
//! the agent schedules a job from a chat message (the fake model calls the `cron` tool), the
//! job fires as a turn of that chat and its answer arrives; a job due while the gateway was
//! down fires once after the start; a heartbeat that answers HEARTBEAT_OK stays silent and
//! one that answers anything else is delivered.

use crate::common;

use std::time::Duration;

use common::telegram::{TgConfig, TgSetup, dm};

/// What the fake model answers to a fired job `id` with `message` (it echoes the prompt).
fn fired(id: &str, message: &str) -> String {
    format!("ok: [Scheduled job {id}] {message}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_agent_schedules_fires_into_the_chat() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann,
        r#"tool cron {"action": "add", "id": "hourly", "every": "1h", "message": "hourly check"}"#,
    );
    gw.wait(&s, "the second confirmation", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("done: Scheduled: hourly"))
    })
    .await;
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "/status");
    gw.wait(&s, "/status with the next run", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("Next run: hourly at ") && t.contains("(every 1h)"))
    })
    .await;
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann,
        r#"tool cron {"action": "add", "id": "soon", "at": "in 2s", "message": "ping from the job"}"#,
    );
    gw.wait(&s, "the tool's confirmation", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("done: Scheduled: soon"))
    })
    .await;
    let want = fired("soon", "ping from the job");
    gw.wait(&s, "the job's answer", |s| s.texts(42).contains(&want))
        .await;
    gw.stop().await;
    assert_eq!(s.texts(42).iter().filter(|t| **t == want).count(), 1);
    let (ok, status) = s.cli(&["status"]).await;
    assert!(ok, "{status}");
    // The one-shot job went after its run; the hourly one waits.
    assert!(
        status.contains("scheduled jobs: 1\n  hourly  every 1h  next "),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_due_while_the_gateway_was_down_fires_once_after_the_start() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann,
        r#"tool cron {"action": "add", "id": "later", "at": "in 3s", "message": "while you were away"}"#,
    );
    gw.wait(&s, "the tool's confirmation", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("done: Scheduled: later"))
    })
    .await;
    gw.kill().await;
    // The job falls due while no gateway runs: wait until the time the store gives it.
    let due = next_run(&s, "later").await;
    tokio::time::sleep(Duration::from_millis(due.saturating_sub(now_ms()))).await;
    let want = fired("later", "while you were away");
    assert!(!s.texts(42).contains(&want));
    let mut gw = s.gateway();
    gw.wait(&s, "the missed job's answer", |s| {
        s.texts(42).contains(&want)
    })
    .await;
    // The one-shot job left the store when it fired, so no later pass can fire it again, and
    // no second run of it waits in the queue.
    let (ok, list) = s.cli(&["cron", "list"]).await;
    assert!(ok && !list.contains("later"), "{list}");
    wait_no_pending_turns(&s).await;
    gw.stop().await;
    assert_eq!(s.texts(42).iter().filter(|t| **t == want).count(), 1);
    let asked = s.asked();
    let prompt = "[Scheduled job later] while you were away";
    assert_eq!(
        asked.iter().filter(|a| *a == prompt).count(),
        1,
        "{asked:#?}"
    );
}

/// When job `id` runs next (ms since the epoch), from `chela cron list --json` on the store.
async fn next_run(s: &TgSetup, id: &str) -> u64 {
    let (ok, out) = s.cli(&["cron", "list", "--json"]).await;
    assert!(ok, "{out}");
    let list: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let job = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id);
    job.and_then(|j| j["next_ms"].as_u64())
        .unwrap_or_else(|| panic!("no next run of {id}: {out}"))
}

/// Waits until the running gateway's `chela status` shows no pending turn.
async fn wait_no_pending_turns(s: &TgSetup) {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        let (ok, status) = s.cli(&["status"]).await;
        if ok && status.contains("pending turns: 0\n") {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Now, in ms since the epoch.
fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_millis() as u64
}

/// A gateway with a heartbeat every 3 s into Ann's chat, whose prompt is `prompt`; Ann has
/// said hello (so the fake Telegram knows her chat) and got her answer before the first beat.
async fn heartbeat(prompt: &str) -> (TgSetup, common::telegram::Gateway) {
    let tables = format!(
        "[heartbeat]\nevery = \"3s\"\nchannel = \"telegram\"\nchat = \"42\"\nprompt = \"{prompt}\"\n"
    );
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &tables,
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "hello");
    gw.wait(&s, "the answer to hello", |s| s.texts(42) == ["ok: hello"])
        .await;
    (s, gw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_that_is_ok_stays_silent() {
    let (s, mut gw) = heartbeat("verbatim HEARTBEAT_OK").await;
    gw.wait(&s, "three beats", |s| {
        s.asked()
            .iter()
            .filter(|a| *a == "verbatim HEARTBEAT_OK")
            .count()
            >= 3
    })
    .await;
    // A graceful stop lets the last beat's run end and deliver what it would send.
    gw.stop().await;
    assert_eq!(s.texts(42), ["ok: hello"], "the beats sent nothing");
    assert_eq!(
        s.tg.sent(42).len(),
        1,
        "not even a deleted preview: {:#?}",
        s.tg.sent(42)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_with_something_to_say_is_delivered() {
    let (s, mut gw) = heartbeat("verbatim The nightly build is red.").await;
    gw.wait(&s, "the alert", |s| {
        s.texts(42).iter().any(|t| t == "The nightly build is red.")
    })
    .await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_job_runs_in_its_own_session_and_answers_in_the_chat() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat,
        ann,
        r#"tool cron {"action": "add", "id": "iso", "at": "in 2s", "message": "digest", "isolated": true}"#,
    );
    let want = fired("iso", "digest");
    gw.wait(&s, "the isolated job's answer in the chat", |s| {
        s.texts(42).contains(&want)
    })
    .await;
    gw.stop().await;
    let (ok, own) = s.cli(&["sessions", "show", "agent:main:cron:iso"]).await;
    assert!(ok, "{own}");
    assert!(own.contains("[Scheduled job iso] digest"), "{own}");
    let (ok, chat_session) = s
        .cli(&["sessions", "show", "agent:main:telegram:direct:42"])
        .await;
    assert!(ok, "{chat_session}");
    assert!(
        !chat_session.contains("[Scheduled job iso]"),
        "the chat's history holds only the chat: {chat_session}"
    );
}
