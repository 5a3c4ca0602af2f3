//! End-to-end: what survives a process: kill -9 mid-run, restart, status, and transcripts
//! moved with `sessions export|import`.

use crate::common;

use common::{KEY, Setup, count, messages, text_of};

/// The whole answer to `slow 100 30`.
fn slow_answer() -> String {
    (1..=30).map(|i| format!("tick {i} ")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_by_kill_9_runs_once_after_restart() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("fast one").await;
    chat.wait_for("ok: fast one\n").await;
    chat.send("slow 100 30").await;
    chat.wait_for("tick 1 ").await;
    let first = chat.kill().await;
    assert!(!first.contains("tick 30"), "{first:?}");

    // Restart with nothing typed: the pending turn runs, then chat exits.
    let second = setup.chat().finish().await;
    assert!(second.status.success(), "{}", second.stderr);
    assert!(second.stdout.contains("tick 30"), "{:?}", second.stdout);
    assert!(!second.stdout.contains("fast one"), "{:?}", second.stdout);

    let union = format!("{first}{}", second.stdout);
    assert_eq!(count(&union, "ok: fast one"), 1, "{union:?}");
    assert_eq!(count(&union, &slow_answer()), 1, "{union:?}");
    // fast one, slow (cut), slow (again).
    assert_eq!(setup.fake.request_count(), 3);

    let status = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{report}");
    assert!(report.contains("pending turns: 0"), "{report}");
    assert!(report.contains("undelivered replies: 0"), "{report}");

    // The rerun's answer is in the transcript once, and the transcript ends with it.
    let entries = setup.export(KEY).await;
    let msgs = messages(&entries);
    let answers = msgs
        .iter()
        .filter(|m| m["role"] == "assistant" && text_of(m) == slow_answer())
        .count();
    assert_eq!(answers, 1);
    assert_eq!(text_of(msgs.last().unwrap()), slow_answer());
    // The cut turn's user message is recorded once, and the rerun showed it to the model once.
    let is_slow = |m: &serde_json::Value| m["role"] == "user" && text_of(m) == "slow 100 30";
    assert_eq!(
        msgs.iter().filter(|m| is_slow(m)).count(),
        1,
        "{entries:#?}"
    );
    let calls = setup.model_calls();
    let rerun = calls[2]["messages"].as_array().unwrap();
    assert_eq!(rerun.iter().filter(|m| is_slow(m)).count(), 1, "{rerun:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_import_export_is_byte_identical_and_new_only_appends() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("first message").await;
    chat.wait_for("ok: first message\n").await;
    chat.send(r#"tool write {"path":"f.txt","content":"x"}"#)
        .await;
    chat.wait_for("done:").await;
    chat.wait_for("\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);

    let a = setup.path("a.jsonl");
    let b = setup.path("b.jsonl");
    let (a_arg, b_arg) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = setup
        .run(&["sessions", "export", KEY, "--out", a_arg])
        .await;
    assert!(out.status.success(), "{out:?}");
    let out = setup
        .run(&["sessions", "import", "agent:main:main", "--in", a_arg])
        .await;
    assert!(out.status.success(), "{out:?}");
    let out = setup
        .run(&["sessions", "export", "agent:main:main", "--out", b_arg])
        .await;
    assert!(out.status.success(), "{out:?}");
    let (a_bytes, b_bytes) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(a_bytes.len() > 100);
    assert_eq!(
        String::from_utf8_lossy(&a_bytes),
        String::from_utf8_lossy(&b_bytes)
    );
    assert_eq!(a_bytes, b_bytes);
    // Importing over a session that has entries is refused.
    let out = setup.run(&["sessions", "import", KEY, "--in", a_arg]).await;
    assert!(!out.status.success());

    let list = setup.run(&["sessions", "list"]).await;
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(listed.contains("agent:main:main"), "{listed}");
    assert!(listed.contains(KEY), "{listed}");

    // /new appends a reset entry and deletes nothing.
    let before = String::from_utf8(a_bytes).unwrap();
    let mut chat = setup.chat();
    chat.send("/new").await;
    chat.wait_for("New session started.\n").await;
    chat.send("after reset").await;
    chat.wait_for("ok: after reset\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let out = setup.run(&["sessions", "export", KEY]).await;
    let after = String::from_utf8(out.stdout).unwrap();
    assert!(after.starts_with(&before), "history was rewritten");
    let added: Vec<serde_json::Value> = after[before.len()..]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = added.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["reset", "message", "message"], "{added:#?}");
    assert!(added[0]["reason"].is_string(), "{added:#?}");
    // The model's next call did not see the archived window.
    let calls = setup.model_calls();
    let sent = serde_json::to_string(&calls.last().unwrap()["messages"]).unwrap();
    assert!(!sent.contains("first message"), "{sent}");
}

/// Runs `slow 100 30` in `chela gateway`, SIGTERMs it mid-stream (exit 0, turn left pending),
/// then lets `chela chat` with empty stdin resume it. Returns the resumed run's output.
async fn sigterm_mid_run_then_restart(setup: &Setup) -> String {
    let mut gateway = common::Chat::spawn(setup.chela(&["gateway"]));
    gateway.send("hello").await;
    gateway.wait_for("ok: hello\n").await;
    gateway.send("slow 100 30").await;
    gateway.wait_for("tick 1 ").await;
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(!done.stdout.contains("tick 30"), "{:?}", done.stdout);

    let status = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("pending turns: 1"), "{report}");
    let again = setup.chat().finish().await;
    assert!(again.status.success(), "{}", again.stderr);
    again.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_gateway_and_its_run_resumes_at_the_next_start() {
    let setup = Setup::openai("steer").await;
    let resumed = sigterm_mid_run_then_restart(&setup).await;
    assert!(resumed.contains(&slow_answer()), "{resumed:?}");
    assert!(!resumed.contains("hello"), "{resumed:?}");
    // The rerun's model call shows the cut message once, and the transcript records it once.
    let is_slow = |m: &serde_json::Value| m["role"] == "user" && text_of(m) == "slow 100 30";
    let calls = setup.model_calls();
    let rerun = calls.last().unwrap()["messages"].as_array().unwrap();
    assert_eq!(rerun.iter().filter(|m| is_slow(m)).count(), 1, "{rerun:#?}");
    let entries = setup.export(KEY).await;
    let msgs = messages(&entries);
    assert_eq!(
        msgs.iter().filter(|m| is_slow(m)).count(),
        1,
        "{entries:#?}"
    );
    common::assert_paired(&entries);
    let status = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("pending turns: 0"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_resumed_after_sigterm_ends_its_model_call_with_the_user_message() {
    let setup = Setup::start(common::Provider::Anthropic, "steer", 200, "").await;
    sigterm_mid_run_then_restart(&setup).await;
    let calls = setup.model_calls();
    let rerun = calls.last().unwrap()["messages"].as_array().unwrap();
    // A trailing assistant message is a prefill: the model would continue "tick 1 ...".
    assert_eq!(rerun.last().unwrap()["role"], "user", "{rerun:#?}");
}

/// With a shutdown grace, SIGTERM lets the running turn finish and deliver its reply before
/// the gateway exits: nothing is left to run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_running_turn_finish_within_the_grace() {
    let setup = Setup::openai("steer").await;
    let config = std::fs::read_to_string(setup.config()).unwrap();
    std::fs::write(
        setup.config(),
        config.replace("shutdown_grace_s = 0", "shutdown_grace_s = 60"),
    )
    .unwrap();
    let mut gateway = common::Chat::spawn(setup.chela(&["gateway"]));
    gateway.send("slow 100 10").await;
    gateway.wait_for("tick 1 ").await;
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let whole: String = (1..=10).map(|i| format!("tick {i} ")).collect();
    assert!(done.stdout.contains(whole.trim_end()), "{:?}", done.stdout);
    assert_eq!(setup.fake.request_count(), 1, "the turn ran once");
    let status = setup.run(&["status"]).await;
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("pending turns: 0"), "{report}");
    assert!(report.contains("undelivered replies: 0"), "{report}");
}
