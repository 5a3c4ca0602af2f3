//! End-to-end, the operator's `chela cron` against a real `chela gateway` and the fake
//! Telegram: a job added on the command line fires into the chat of the session it names
//! (even after a turn sent into that session through the RPC),
//! `list` shows it with its next run, `run` fires one now, `rm` removes it; a config job
//! cannot be removed; without the operator token a change is refused; with no gateway,
//! `add`, `rm` and `list` work on the store and `run` says the gateway must run.

use crate::common;

use common::telegram::{TgConfig, TgSetup, dm};

/// Ann's direct session with the bot.
const ANN: &str = "agent:main:telegram:direct:42";

/// A `[[cron]]` job into Ann's chat.
const CONFIG_JOB: &str = "[[cron]]\nid = \"weekly\"\nschedule = \"30 14 * * 3\"\ntz = \"Europe/Berlin\"\nmessage = \"weekly report\"\nchannel = \"telegram\"\nchat = \"42\"\n";

/// What the fake model answers to a fired job `id` with `message` (it echoes the prompt).
fn fired(id: &str, message: &str) -> String {
    format!("ok: [Scheduled job {id}] {message}")
}

/// `chela <args>`: exit code and stdout + stderr.
async fn cron(s: &TgSetup, args: &[&str]) -> (Option<i32>, String) {
    let mut argv = vec!["cron"];
    argv.extend_from_slice(args);
    let out = s.setup.run(&argv).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// How often the model was asked `prompt`.
fn asked(s: &TgSetup, prompt: &str) -> usize {
    s.asked().iter().filter(|a| *a == prompt).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_schedules_lists_runs_and_removes_jobs() {
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: CONFIG_JOB,
        ..TgConfig::default()
    })
    .await;
    // Before any gateway: added on the store, fired later.
    let (code, out) = cron(
        &s,
        &[
            "add",
            "--at",
            "in 1h",
            "-m",
            "offline",
            "--id",
            "off",
            "--session",
            ANN,
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("scheduled: off  at "), "{out}");
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "hello");
    gw.wait(&s, "the answer to hello", |s| s.texts(42) == ["ok: hello"])
        .await;
    // A turn sent into Ann's session through the RPC answers there, not in her chat, and
    // leaves her session answering in her chat (the job below must reach it).
    let out = s
        .setup
        .run(&["agent", "--session", ANN, "--message", "from the rpc"])
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok: from the rpc"
    );

    let (code, out) = cron(
        &s,
        &[
            "add",
            "--every",
            "2s",
            "--message",
            "hi",
            "--id",
            "tick",
            "--session",
            ANN,
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("scheduled: tick  every 2s  next "), "{out}");
    let tick = fired("tick", "hi");
    gw.wait(&s, "the job's answer in Ann's chat", |s| {
        s.texts(42).contains(&tick)
    })
    .await;

    let (code, list) = cron(&s, &["list"]).await;
    assert_eq!(code, Some(0), "{list}");
    assert!(list.contains("tick  every 2s  next "), "{list}");
    assert!(
        list.contains(&format!("{ANN}  \"hi\"  (operator)")),
        "{list}"
    );
    assert!(list.contains("weekly  cron 30 14 * * 3"), "{list}");
    assert!(list.contains("(config)"), "{list}");
    let (code, json) = cron(&s, &["list", "--json"]).await;
    assert_eq!(code, Some(0), "{json}");
    let jobs: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let ids: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["off", "tick", "weekly"]);

    // The hourly job runs now.
    let (code, out) = cron(&s, &["run", "off"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("job off queued to run now (run-"), "{out}");
    let off = fired("off", "offline");
    gw.wait(&s, "the job run now", |s| s.texts(42).contains(&off))
        .await;

    let (code, out) = cron(&s, &["rm", "tick"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("removed job tick"), "{out}");
    let before = asked(&s, "[Scheduled job tick] hi");
    // Two more periods, counted by a job of the same period added after the removal: at
    // most the run of tick already queued when it went.
    let (code, out) = cron(
        &s,
        &[
            "add",
            "--every",
            "2s",
            "-m",
            "tock",
            "--id",
            "tock",
            "--session",
            ANN,
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    gw.wait(&s, "two runs of the job added after", |s| {
        asked(s, "[Scheduled job tock] tock") >= 2
    })
    .await;
    assert!(asked(&s, "[Scheduled job tick] hi") <= before + 1);
    let (code, out) = cron(&s, &["rm", "tock"]).await;
    assert_eq!(code, Some(0), "{out}");
    let (_, list) = cron(&s, &["list"]).await;
    assert!(!list.contains("tick"), "{list}");

    // The config's job stays the config's.
    let (code, out) = cron(&s, &["rm", "weekly"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("job `weekly` is kept in the config"), "{out}");
    // Bad arguments name their flag.
    let (code, out) = cron(&s, &["add", "-m", "x", "--cron", "61 * * * *"]).await;
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--cron"), "{out}");
    let (code, out) = cron(&s, &["add", "-m", "x"]).await;
    assert_eq!(code, Some(2), "{out}");

    gw.stop().await;
    assert_eq!(s.texts(42).iter().filter(|t| **t == off).count(), 1);
    // No gateway: `run` needs one; `rm` and `list` work on the store.
    let (code, out) = cron(&s, &["run", "off"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no gateway is running"), "{out}");
    let (code, out) = cron(&s, &["rm", "off"]).await;
    assert_eq!(code, Some(0), "{out}");
    let (code, list) = cron(&s, &["list"]).await;
    assert_eq!(code, Some(0), "{list}");
    assert!(list.contains("weekly") && !list.contains("off"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_operator_token_a_change_is_refused() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, "hello");
    gw.wait(&s, "the answer to hello", |s| s.texts(42) == ["ok: hello"])
        .await;
    let add = [
        "add",
        "--every",
        "1h",
        "-m",
        "hi",
        "--id",
        "j1",
        "--session",
        ANN,
    ];
    let (code, out) = cron(&s, &add).await;
    assert_eq!(code, Some(0), "{out}");
    // A discovery file without the operator token: the client token is all `chela` has.
    let path = s.setup.path("data.rpc");
    let mut found = chela::rpc::discovery::read(&path).unwrap();
    assert!(found.token.is_some(), "the gateway made the client token");
    found.operator_token = None;
    chela::rpc::discovery::write(&path, &found).unwrap();
    for args in [&["rm", "j1"][..], &["run", "j1"], &add] {
        let (code, out) = cron(&s, args).await;
        assert_eq!(code, Some(1), "{args:?}: {out}");
        assert!(out.contains("needs the operator token"), "{args:?}: {out}");
    }
    // Reading is a client's right.
    let (code, list) = cron(&s, &["list"]).await;
    assert_eq!(code, Some(0), "{list}");
    assert!(list.contains("j1  every 1h"), "{list}");
    gw.stop().await;
    assert_eq!(s.texts(42), ["ok: hello"], "nothing ran");
}
