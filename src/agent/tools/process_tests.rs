//! Tests of background `exec` and the `process` tool, through the tool interface.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::test_support::{ManualClock, gone_by, read_pid};
use super::*;
use crate::agent::tools::exec::ExecTool;
use crate::agent::tools::job::system_clock;
use crate::agent::tools::test_support::ctx;

/// An `exec` and a `process` tool sharing one registry.
struct Tools {
    exec: ExecTool,
    process: ProcessTool,
    ctx: ToolContext,
}

impl Tools {
    fn new(dir: &Path) -> Self {
        Tools::with(dir, Limits::default(), system_clock())
    }

    fn with(dir: &Path, limits: Limits, clock: crate::agent::tools::job::Clock) -> Self {
        let registry = Arc::new(ProcessRegistry::with_limits(limits, clock));
        Tools {
            exec: ExecTool::new(Arc::clone(&registry)),
            process: ProcessTool::new(registry),
            ctx: ctx(dir),
        }
    }

    /// Starts `command` in the background (`extra` merged into the arguments); its id.
    async fn start(&self, command: &str, extra: Value) -> String {
        let mut args = json!({"command": command, "background": true});
        if let (Some(args), Value::Object(extra)) = (args.as_object_mut(), extra) {
            args.extend(extra);
        }
        let out = self.exec.call(args, &self.ctx).await;
        assert!(!out.is_error, "{}", out.text);
        assert!(out.text.starts_with("started proc-"), "{}", out.text);
        out.text.split_whitespace().nth(1).unwrap().to_string()
    }

    async fn process(&self, args: Value) -> ToolOutput {
        self.process.call(args, &self.ctx).await
    }

    /// Polls `id` until the output gathered over the polls satisfies `done`; all of it.
    async fn poll_until(&self, id: &str, done: impl Fn(&str, &str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = String::new();
        loop {
            let out = self
                .process(json!({"action": "poll", "id": id, "timeout": 0.5}))
                .await;
            assert!(!out.is_error, "{}", out.text);
            let (status, body) = out.text.split_once('\n').unwrap();
            if body != "(no new output)" {
                seen.push_str(body);
            }
            if done(status, &seen) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "gave up polling {id}: {status} {seen:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_interactive_python_is_driven_through_send_keys_on_a_pty() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let id = tools
        .start(
            "python3 -i -q",
            json!({"pty": true, "env": {"PYTHON_BASIC_REPL": "1"}}),
        )
        .await;
    tools.poll_until(&id, |_, out| out.contains(">>> ")).await;
    let out = tools
        .process(json!({"action": "send-keys", "id": id, "keys": ["1+1", "Enter"]}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    let answer = tools.poll_until(&id, |_, out| out.contains("\n>>> ")).await;
    assert!(answer.starts_with("1+1\n2\n"), "{answer:?}");
    let log = tools.process(json!({"action": "log", "id": id})).await;
    assert!(log.text.contains(">>> 1+1\n2\n>>> "), "{}", log.text);
    let out = tools
        .process(json!({"action": "send-keys", "id": id, "keys": ["C-d"]}))
        .await;
    assert!(!out.is_error, "{}", out.text);
    tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    let out = tools
        .process(json!({"action": "write", "id": id, "data": "2+2\n"}))
        .await;
    assert!(
        out.is_error && out.text.contains("has ended"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn pipes_take_writes_and_c_d_closes_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let id = tools.start("cat; echo bye", json!({})).await;
    let out = tools
        .process(json!({"action": "write", "id": id, "data": "hello\n"}))
        .await;
    assert_eq!(out, ToolOutput::ok(format!("wrote 6 bytes to {id}")));
    assert_eq!(
        tools.poll_until(&id, |_, out| out.contains('\n')).await,
        "hello\n"
    );
    tools
        .process(json!({"action": "send-keys", "id": id, "keys": ["x", "Enter", "C-d"]}))
        .await;
    let rest = tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    assert_eq!(rest, "x\nbye\n");
}

#[tokio::test]
async fn background_poll_and_kill_end_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let id = tools
        .start("sleep 30 & echo $! > pid; echo up; wait", json!({}))
        .await;
    assert_eq!(
        tools.poll_until(&id, |_, out| out.contains("up")).await,
        "up\n"
    );
    let out = tools.process(json!({"action": "poll", "id": id})).await;
    assert!(out.text.contains("running for"), "{}", out.text);
    assert!(out.text.ends_with("(no new output)"), "{}", out.text);
    let list = tools.process(json!({"action": "list"})).await;
    assert!(
        list.text.contains(&format!("{id}: running for")),
        "{}",
        list.text
    );
    let killed_at = Instant::now();
    let out = tools.process(json!({"action": "kill", "id": id})).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.contains("killed by signal SIGTERM"),
        "{}",
        out.text
    );
    let pid = read_pid(dir.path());
    assert!(gone_by(pid, killed_at + Duration::from_secs(2)).await);
    let out = tools.process(json!({"action": "kill", "id": id})).await;
    assert!(out.text.contains("already ended"), "{}", out.text);
}

#[tokio::test]
async fn c_c_on_pipes_interrupts_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let command = "trap 'echo interrupted; exit 130' INT; echo ready; while :; do sleep 0.1; done";
    let id = tools.start(command, json!({})).await;
    tools.poll_until(&id, |_, out| out.contains("ready")).await;
    tools
        .process(json!({"action": "send-keys", "id": id, "keys": ["C-c"]}))
        .await;
    let out = tools
        .poll_until(&id, |status, _| status.contains("exit code 130"))
        .await;
    assert!(out.contains("interrupted"), "{out}");
}

#[tokio::test]
async fn stop_of_a_run_leaves_background_processes_and_shutdown_kills_them() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let id = tools
        .start("echo $$ > pid; echo ready; exec sleep 30", json!({}))
        .await;
    tools.poll_until(&id, |_, out| out.contains("ready")).await;
    tools.ctx.cancel.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let out = tools.process(json!({"action": "poll", "id": id})).await;
    assert!(out.text.contains("running for"), "{}", out.text);
    let pid = read_pid(dir.path());
    assert!(!super::test_support::is_gone(pid));
    let dropped_at = Instant::now();
    drop(tools);
    assert!(gone_by(pid, dropped_at + Duration::from_secs(2)).await);
}

#[tokio::test]
async fn a_background_timeout_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let id = tools
        .start("sleep 30 & echo $! > pid; wait", json!({"timeout": 0.3}))
        .await;
    tools
        .poll_until(&id, |status, _| status.contains("timed out"))
        .await;
    assert!(
        gone_by(
            read_pid(dir.path()),
            Instant::now() + Duration::from_secs(2)
        )
        .await
    );
}

#[tokio::test]
async fn log_pages_by_lines_and_poll_counts_dropped_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        buffer_bytes: 1000,
        ..Limits::default()
    };
    let tools = Tools::with(dir.path(), limits, system_clock());
    let id = tools.start("seq 1 10", json!({})).await;
    tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    let out = tools
        .process(json!({"action": "log", "id": id, "offset": 3, "limit": 2}))
        .await;
    assert!(
        out.text.ends_with("\n[lines 3-4 of 10]\n3\n4\n"),
        "{}",
        out.text
    );
    let out = tools
        .process(json!({"action": "log", "id": id, "limit": 2}))
        .await;
    assert!(
        out.text.ends_with("[lines 9-10 of 10]\n9\n10\n"),
        "{}",
        out.text
    );
    let out = tools
        .process(json!({"action": "log", "id": id, "offset": 11}))
        .await;
    assert!(
        out.is_error && out.text.contains("10 lines"),
        "{}",
        out.text
    );

    // 48,894 bytes through a 1,000-byte buffer: the newest kept, the rest counted.
    let id = tools.start("seq 1 10000", json!({})).await;
    tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    let out = tools.process(json!({"action": "log", "id": id})).await;
    assert!(
        out.text.contains("47894 older bytes were dropped"),
        "{}",
        out.text
    );
    assert!(out.text.ends_with("9999\n10000\n"), "{}", out.text);
}

#[tokio::test]
async fn poll_says_how_much_output_was_dropped_unread() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        buffer_bytes: 1000,
        ..Limits::default()
    };
    let tools = Tools::with(dir.path(), limits, system_clock());
    let id = tools.start("seq 1 10000", json!({})).await;
    // All of it is written before the first poll (listing reads no output): polls racing a
    // slow writer could each take less than the buffer and drop nothing.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = tools.process(json!({"action": "list"})).await.text;
        if listed.contains("exit code 0") {
            break;
        }
        assert!(Instant::now() < deadline, "seq did not end: {listed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    assert!(
        seen.contains("bytes of output were dropped before this poll"),
        "{seen}"
    );
    assert!(seen.ends_with("9999\n10000\n"), "{seen}");
}

#[tokio::test]
async fn the_registry_bounds_running_processes() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_running: 2,
        ..Limits::default()
    };
    let tools = Tools::with(dir.path(), limits, system_clock());
    let first = tools.start("sleep 30", json!({})).await;
    tools.start("sleep 30", json!({})).await;
    let args = json!({"command": "sleep 30", "background": true});
    let out = tools.exec.call(args.clone(), &tools.ctx).await;
    assert!(out.is_error, "{}", out.text);
    assert!(
        out.text.contains("too many background processes"),
        "{}",
        out.text
    );
    tools.process(json!({"action": "kill", "id": first})).await;
    let out = tools.exec.call(args, &tools.ctx).await;
    assert!(out.text.starts_with("started proc-3"), "{}", out.text);
}

#[tokio::test]
async fn finished_processes_are_forgotten_after_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let tools = Tools::with(dir.path(), Limits::default(), clock.clock());
    let id = tools.start("echo hi", json!({})).await;
    tools
        .poll_until(&id, |status, _| status.contains("exit code 0"))
        .await;
    clock.advance(Duration::from_secs(29 * 60));
    let list = tools.process(json!({"action": "list"})).await;
    assert!(
        list.text
            .contains(&format!("{id}: exit code 0 after 0 s, 29 min ago")),
        "{}",
        list.text
    );
    clock.advance(Duration::from_secs(60));
    let list = tools.process(json!({"action": "list"})).await;
    assert_eq!(list, ToolOutput::ok("(no background processes)"));
    let out = tools.process(json!({"action": "log", "id": id})).await;
    assert!(
        out.is_error && out.text.contains("no process"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn finished_processes_make_room_when_too_many_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_running: 1,
        max_kept: 2,
        ..Limits::default()
    };
    let tools = Tools::with(dir.path(), limits, system_clock());
    for _ in 0..3 {
        let id = tools.start("true", json!({})).await;
        tools
            .poll_until(&id, |status, _| status.contains("exit code 0"))
            .await;
    }
    let list = tools.process(json!({"action": "list"})).await;
    let ids: Vec<&str> = list.text.lines().map(|l| &l[..6]).collect();
    assert_eq!(ids, ["proc-2", "proc-3"]);
}

#[tokio::test]
async fn bad_calls_are_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Tools::new(dir.path());
    let out = tools.process(json!({"action": "poll"})).await;
    assert!(out.is_error && out.text.contains("`id`"), "{}", out.text);
    let out = tools
        .process(json!({"action": "poll", "id": "proc-9"}))
        .await;
    assert!(
        out.is_error && out.text.contains("action list"),
        "{}",
        out.text
    );
    let out = tools
        .process(json!({"action": "dance", "id": "proc-1"}))
        .await;
    assert!(
        out.is_error && out.text.contains("send-keys"),
        "{}",
        out.text
    );
    let out = tools
        .process(json!({"action": "send-keys", "id": "proc-1", "keys": [1]}))
        .await;
    assert!(out.is_error && out.text.contains("`keys`"), "{}", out.text);
    let args = json!({"command": "true", "background": true, "workdir": ".."});
    let out = tools.exec.call(args, &tools.ctx).await;
    assert!(
        out.is_error && out.text.contains("outside the workspace"),
        "{}",
        out.text
    );
}
