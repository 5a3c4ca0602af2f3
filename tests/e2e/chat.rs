//! End-to-end: `chela chat` over piped stdin against a fake model: /stop, queue modes, errors.

use crate::common;

use common::{
    KEY, Provider, Setup, assert_paired, count, last_user_text, messages, text_of, tool_calls,
    wait_until,
};

/// Starts a slow reply, stops it with `trigger` once it streams, then checks the session
/// still answers and the transcript records the abort.
async fn stop_mid_stream(trigger: &str) {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("slow 200 100").await;
    chat.wait_for("tick 1 ").await;
    chat.send(trigger).await;
    let stopped = chat.wait_for("Stopped.").await;
    assert!(!stopped.contains("tick 100"), "{stopped}");
    chat.send("hello").await;
    chat.wait_for("ok: hello\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // The stopped reply ended (marked) before the command answer, on its own line.
    let out = &done.stdout;
    assert!(out.contains("[stopped]\nStopped.\n"), "{out:?}");
    assert!(!out.contains("tick 100"), "{out:?}");
    assert_eq!(count(out, "ok: hello"), 1, "{out:?}");
    // The stop was not sent to the model: two model calls in all.
    assert_eq!(setup.fake.request_count(), 2);

    let entries = setup.export(KEY).await;
    let msgs = messages(&entries);
    let slow = msgs
        .iter()
        .position(|m| m["role"] == "user" && text_of(m) == "slow 200 100")
        .unwrap();
    assert_eq!(msgs[slow + 1]["role"], "assistant");
    assert_eq!(msgs[slow + 1]["stopReason"], "aborted", "{entries:#?}");
    assert!(text_of(msgs[slow + 1]).starts_with("tick 1 "));
    assert!(
        !msgs.iter().any(|m| text_of(m) == trigger),
        "the stop trigger reached the transcript"
    );
    assert_paired(&entries);
    let last = msgs.last().unwrap();
    assert_eq!(text_of(last), "ok: hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_stop_ends_a_streaming_reply_and_the_session_stays_usable() {
    stop_mid_stream("/stop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_stop_message_acts_like_slash_stop() {
    stop_mid_stream("stop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_during_a_tool_call_is_steered_into_the_run() {
    let setup = Setup::openai("steer").await;
    // In the workspace: the exec sandbox lets commands write nowhere else.
    std::fs::create_dir_all(setup.path("ws")).unwrap();
    let fifo = setup.path("ws/gate");
    let started = setup.path("ws/started");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let first = format!("touch {} && cat {}", started.display(), fifo.display());
    let tools = serde_json::json!([
        {"name": "exec", "arguments": {"command": first}},
        {"name": "exec", "arguments": {"command": "echo second"}},
    ]);
    let mut chat = setup.chat();
    chat.send(&format!("tools {tools}")).await;
    // The first exec is running (and blocked on the FIFO).
    wait_until("the first exec to start", || started.exists()).await;
    assert_eq!(setup.fake.request_count(), 1);
    chat.send("please also say hello").await;
    // /status goes through the same lane mailbox after the message: once it answers, the
    // message has reached the run.
    chat.send("/status").await;
    chat.wait_for("Run: active").await;
    let gate = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(gate, "released\n"))
        .await
        .unwrap()
        .unwrap();
    chat.wait_for("ok: please also say hello\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(count(&done.stdout, "ok: "), 1, "{:?}", done.stdout);

    // Two model calls: the tool call, then one answer that carries the steered message.
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(last_user_text(&calls[1]), "please also say hello");
    let sent = calls[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert!(
        roles.ends_with(&["assistant", "tool", "tool", "user"]),
        "{roles:?}"
    );

    let entries = setup.export(KEY).await;
    let results = assert_paired(&entries);
    assert_eq!(results.len(), 2);
    assert!(text_of(&results[0].1).contains("released"), "{results:?}");
    assert_eq!(
        text_of(&results[1].1),
        "Skipped to process an incoming message."
    );
    let msgs = messages(&entries);
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "user",
            "assistant"
        ]
    );
    assert_eq!(tool_calls(msgs[1]).len(), 2);
    assert_eq!(text_of(msgs[4]), "please also say hello");
    assert_eq!(text_of(msgs[5]), "ok: please also say hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_mode_merges_a_burst_into_one_turn() {
    let setup = Setup::start(Provider::OpenAi, "collect", 300, "").await;
    let texts = [
        "alpha one",
        "bravo two",
        "charlie three",
        "delta four",
        "echo five",
    ];
    let mut chat = setup.chat();
    chat.send(&texts.join("\n")).await;
    chat.wait_for("ok: [Queued messages while agent was busy]")
        .await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(count(&done.stdout, "ok: "), 1, "{:?}", done.stdout);

    let calls = setup.model_calls();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let text = last_user_text(&calls[0]);
    assert!(
        text.starts_with("[Queued messages while agent was busy]"),
        "{text}"
    );
    let mut at = 0;
    for (i, t) in texts.iter().enumerate() {
        let numbered = format!("#{}", i + 1);
        let n = text[at..]
            .find(&numbered)
            .unwrap_or_else(|| panic!("{text}"));
        let m = text[at + n..].find(t).unwrap_or_else(|| panic!("{text}"));
        at += n + m;
    }
    assert!(text.contains("tester"), "messages are attributed: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followup_mode_answers_each_message_in_order() {
    let setup = Setup::openai("followup").await;
    let mut chat = setup.chat();
    chat.send("slow 50 5\nsecond").await;
    chat.wait_for("tick 5").await;
    chat.wait_for("ok: second\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let calls = setup.model_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(last_user_text(&calls[0]), "slow 50 5");
    assert_eq!(last_user_text(&calls[1]), "second");
    let msgs = setup.export(KEY).await;
    let texts: Vec<String> = messages(&msgs).into_iter().map(text_of).collect();
    assert_eq!(
        texts,
        [
            "slow 50 5",
            "tick 1 tick 2 tick 3 tick 4 tick 5 ",
            "second",
            "ok: second"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_is_reported_and_the_session_recovers() {
    let setup = Setup::start(Provider::OpenAi, "steer", 200, "max_retries = 1").await;
    let mut chat = setup.chat();
    chat.send("error 500").await;
    let line = chat.wait_for("\n").await;
    assert!(line.contains("⚠️"), "{line:?}");
    assert!(line.contains("model error"), "{line:?}");
    // The call and one retry.
    assert_eq!(setup.fake.request_count(), 2);
    chat.send("hello").await;
    chat.wait_for("ok: hello\n").await;
    let done = chat.finish().await;
    // Piped, a failed turn makes the exit status 1 (the later turn succeeding or not).
    assert_eq!(done.status.code(), Some(1), "{}", done.stderr);
    let entries = setup.export(KEY).await;
    let msgs = messages(&entries);
    assert_eq!(msgs[1]["stopReason"], "error", "{entries:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_call_is_retried_after_retry_after() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("ratelimit 1").await;
    chat.wait_for("ok: recovered\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    assert!(!done.stdout.contains("⚠️"), "{:?}", done.stdout);
    assert_eq!(setup.fake.request_count(), 2);
}

/// True while `pid` is a live (not zombie) process.
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit(')').next().map(|rest| rest.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_a_running_tool_and_everything_it_started() {
    let setup = Setup::openai("steer").await;
    // In the workspace: the exec sandbox lets commands write nowhere else.
    std::fs::create_dir_all(setup.path("ws")).unwrap();
    let (sh, child) = (setup.path("ws/sh.pid"), setup.path("ws/child.pid"));
    let command = format!(
        "echo $$ > {}; sleep 300 & echo $! > {}.tmp; mv {1}.tmp {1}; wait",
        sh.display(),
        child.display()
    );
    let call = serde_json::json!({ "command": command });
    let mut chat = setup.chat();
    chat.send(&format!("tool exec {call}")).await;
    wait_until("the tool to start its child", || child.exists()).await;
    let sh_pid = std::fs::read_to_string(&sh).unwrap().trim().to_string();
    let child_pid = std::fs::read_to_string(&child).unwrap().trim().to_string();
    assert!(alive(&sh_pid) && alive(&child_pid));
    chat.send("/stop").await;
    chat.wait_for("Stopped.").await;
    // The answer comes only after the run settled, so the whole group is gone already.
    assert!(!alive(&sh_pid), "the shell survived /stop");
    assert!(!alive(&child_pid), "the shell's child survived /stop");
    chat.send("hello").await;
    chat.wait_for("ok: hello\n").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // No model call after the tool: the stop cut the run at the tool boundary.
    assert_eq!(setup.fake.request_count(), 2);
    let entries = setup.export(KEY).await;
    let results = assert_paired(&entries);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1["isError"], true, "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_reply_is_printed_exactly_once() {
    let setup = Setup::openai("steer").await;
    let mut chat = setup.chat();
    chat.send("long 6000").await;
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let entries = setup.export(KEY).await;
    let answer = text_of(messages(&entries)[1]);
    assert_eq!(answer.len(), 6000);
    assert_eq!(done.stdout, format!("{answer}\n"));
}
