//! End-to-end: `chela chat` as a command line tool: piped lines handled in input order, logs
//! kept out of the chat, the exit status of a piped chat, `-v`/`-q`, `chat --new --model`.

use crate::common;

use common::{Chat, KEY, Provider, Setup, count, messages, text_of};

/// Two models to switch between.
const MODELS: &str = "model = \"base-model\"\nmodels = [\"base-model\", \"other-model\"]";

/// Where `needle` first appears in `hay`, failing the test when it does not.
fn at(hay: &str, needle: &str) -> usize {
    hay.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in {hay:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_commands_are_answered_in_input_order() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    // One write, as `printf '/model\n/status\n/whoami\n/help\n' | chela chat` does.
    chat.send("/model\n/status\n/whoami\n/help").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let out = &done.stdout;
    let model = at(out, "Model: ");
    let status = at(out, "Session: ");
    let whoami = at(out, "You are ");
    let help = at(out, "/new — ");
    assert!(
        model < status && status < whoami && whoami < help,
        "answers out of order: {out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_model_switch_applies_after_the_lines_before_it() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, MODELS).await;
    let mut chat = setup.chat();
    chat.send("/model other-model\nhi\n/model default\nbye")
        .await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let calls = setup.model_calls();
    let models: Vec<&str> = calls.iter().map(|b| b["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["other-model", "base-model"], "{}", done.stdout);
    let out = &done.stdout;
    assert!(
        at(out, "ok: hi") < at(out, "Model: openai/base-model\n"),
        "{out}"
    );
    assert!(
        at(out, "Model: openai/base-model\n") < at(out, "ok: bye"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_chat_logs_to_its_file_and_exits_1_when_a_turn_failed() {
    // Followup: `hello` is not steered into the failing run (whose retry would answer it).
    let setup = Setup::start(Provider::OpenAi, "followup", 200, "max_retries = 1").await;
    let mut chat = setup.chat();
    chat.send("error 500\nhello").await;
    let done = chat.finish().await;
    assert_eq!(
        done.status.code(),
        Some(1),
        "{} / {}",
        done.stdout,
        done.stderr
    );
    assert_eq!(count(&done.stdout, "⚠️"), 1, "{}", done.stdout);
    assert!(done.stdout.contains("ok: hello\n"), "{}", done.stdout);
    // The retry warnings went to the log file, not between the chat's lines.
    assert!(!done.stderr.contains("WARN"), "{}", done.stderr);
    assert!(done.stderr.contains("1 turn(s) failed"), "{}", done.stderr);
    let log = std::fs::read_to_string(setup.path("data.log")).unwrap();
    assert!(log.contains("model call failed"), "{log}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(setup.path("data.log"))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
    }

    // -v: the log on stderr again. A good turn only: exit status 0.
    let mut chat = Chat::spawn(setup.chela(&["-v", "chat"]));
    chat.send("error 500").await;
    chat.wait_for("⚠️").await;
    chat.close();
    let verbose = chat.finish().await;
    assert_eq!(verbose.status.code(), Some(1), "{}", verbose.stderr);
    assert!(
        verbose.stderr.contains("model call failed"),
        "{}",
        verbose.stderr
    );
    let mut chat = setup.chat();
    chat.send("fine").await;
    let good = chat.finish().await;
    assert!(good.status.success(), "{}", good.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_says_a_failed_run_once_and_q_silences_the_log() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "max_retries = 1").await;
    let out = setup.run(&["agent", "--message", "error 500"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(count(&stdout, "model error"), 1, "{stdout}");
    assert!(!stderr.contains("model error"), "said twice: {stderr}");

    let out = setup.run(&["-q", "agent", "--message", "error 500"]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.trim().is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_new_and_model_start_a_fresh_window_on_that_model() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, MODELS).await;
    let mut chat = setup.chat();
    chat.send("first").await;
    assert!(chat.finish().await.status.success());

    let mut chat = Chat::spawn(setup.chela(&["chat", "--new", "--model", "other-model"]));
    chat.send("second").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let out = &done.stdout;
    assert!(at(out, "New session started.") < at(out, "Model: openai/other-model"));
    assert!(at(out, "Model: openai/other-model") < at(out, "ok: second"));
    let calls = setup.model_calls();
    let last = calls.last().unwrap();
    assert_eq!(last["model"], "other-model");
    let sent = serde_json::to_string(&last["messages"]).unwrap();
    assert!(!sent.contains("\"content\":\"first\""), "{sent}");
    let entries = setup.export(KEY).await;
    assert!(entries.iter().any(|e| e["type"] == "reset"), "{entries:#?}");
    let texts: Vec<String> = messages(&entries).into_iter().map(text_of).collect();
    assert_eq!(texts, ["first", "ok: first", "second", "ok: second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_session_talks_in_the_named_session_and_refuses_a_bad_key() {
    let setup = Setup::openai("steer").await;
    let other = "agent:main:telegram:direct:42";
    let mut chat = Chat::spawn(setup.chela(&["chat", "--session", other]));
    chat.send("hello there\n/status").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(done.stdout.contains("ok: hello there"), "{}", done.stdout);
    assert!(
        done.stdout.contains(&format!("Session: {other}")),
        "{}",
        done.stdout
    );
    let texts: Vec<String> = messages(&setup.export(other).await)
        .into_iter()
        .map(text_of)
        .collect();
    assert_eq!(texts, ["hello there", "ok: hello there"]);
    let listed = setup.chela(&["sessions", "list"]).output().await.unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains(other), "{listed}");
    assert!(
        !listed.contains(KEY),
        "the terminal's own session is untouched: {listed}"
    );
    let shown = setup
        .chela(&["sessions", "show", other])
        .output()
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("\n[usage]\nSession: "), "{shown}");
    assert!(shown.contains("Last turn: "), "{shown}");

    let mut bad = Chat::spawn(setup.chela(&["chat", "--session", "not a key"]));
    bad.send("hi").await;
    let done = bad.finish().await;
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    assert!(done.stderr.contains("--session"), "{}", done.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_beside_a_running_gateway_talks_through_its_rpc() {
    let setup = Setup::openai("steer").await;
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let gateway = Chat::spawn(cmd);
    gateway.wait_stderr_line("rpc listening on ").await;
    // The store is the gateway's: instead of refusing, the chat goes through its RPC.
    let mut chat = setup.chat();
    chat.send("hello there\n/status").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(
        done.stderr.contains("a gateway runs on this store"),
        "{}",
        done.stderr
    );
    assert!(done.stdout.contains("ok: hello there"), "{}", done.stdout);
    assert!(
        done.stdout.contains(&format!("Session: {KEY}")),
        "the terminal's own session: {}",
        done.stdout
    );
    gateway.signal("TERM");
    let stopped = gateway.finish().await;
    assert!(stopped.status.success(), "{}", stopped.stderr);
    let texts: Vec<String> = messages(&setup.export(KEY).await)
        .into_iter()
        .map(text_of)
        .collect();
    assert_eq!(texts, ["hello there", "ok: hello there"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_usage_answers_after_the_turns_before_it() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("hello there\n/usage").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let usage = done
        .stdout
        .split("ok: hello there")
        .nth(1)
        .unwrap_or_default();
    assert!(
        usage.contains("Session: ") && usage.contains(" · 1 model call · $0."),
        "{}",
        done.stdout
    );
}
