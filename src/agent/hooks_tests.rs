//! Tests of the hook runner with real `sh -c` hooks in a temp workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::agent::tools::process::test_support::{gone_by, mkfifo, read_fifo, read_pid};

/// A hook running `sh -c script`.
fn sh(script: &str) -> HookConfig {
    HookConfig {
        command: vec!["sh".into(), "-c".into(), script.into()],
        ..HookConfig::default()
    }
}

fn before_tool(dir: &Path, list: Vec<HookConfig>) -> Hooks {
    let config = HooksConfig {
        before_tool: list,
        ..HooksConfig::default()
    };
    Hooks::new(config, dir.to_path_buf())
}

fn exec_call(command: &str) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "exec".into(),
        arguments: json!({"command": command}),
    }
}

/// Runs `call` through `hooks` with a tool answering `ran`; the output and whether it ran.
async fn through(hooks: &Hooks, call: &ToolCall, cancel: &CancellationToken) -> (ToolOutput, bool) {
    let ran = AtomicBool::new(false);
    let tool = async {
        ran.store(true, Ordering::SeqCst);
        ToolOutput::ok("ran")
    };
    let out = hooks
        .around_tool("agent:main:test", call, cancel, tool)
        .await;
    (out, ran.load(Ordering::SeqCst))
}

async fn check(hooks: &Hooks, command: &str) -> (ToolOutput, bool) {
    through(hooks, &exec_call(command), &CancellationToken::new()).await
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_else_stdout_else_a_default() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("echo out; echo ' no rm here ' >&2; exit 2", "no rm here"),
        ("echo ' only stdout '; exit 2", "only stdout"),
        ("exit 2", DEFAULT_REASON),
    ];
    for (script, reason) in cases {
        let hooks = before_tool(dir.path(), vec![sh(script)]);
        let (out, ran) = check(&hooks, "rm -rf /").await;
        assert!(!ran, "{script}");
        assert_eq!(out, ToolOutput::error(format!("Blocked by hook: {reason}")));
    }
}

#[tokio::test]
async fn a_json_decision_on_stdout_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = before_tool(
        dir.path(),
        vec![sh(r#"echo '{"decision":"block","reason":"not today"}'"#)],
    );
    let (out, ran) = check(&hooks, "ls").await;
    assert!(!ran);
    assert_eq!(out, ToolOutput::error("Blocked by hook: not today"));
    let hooks = before_tool(dir.path(), vec![sh(r#"echo '{"decision":"block"}'"#)]);
    let (out, _) = check(&hooks, "ls").await;
    assert_eq!(out.text, format!("Blocked by hook: {DEFAULT_REASON}"));
}

#[tokio::test]
async fn exit_0_allows_and_the_hook_reads_the_call_as_json_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = before_tool(
        dir.path(),
        vec![
            sh("cat > input.json; pwd > cwd; echo hello"),
            sh(r#"echo '{"decision":"allow"}'; echo noise >&2"#),
        ],
    );
    let (out, ran) = check(&hooks, "ls -l").await;
    assert!(ran);
    assert_eq!(out, ToolOutput::ok("ran"));
    let input: Value = serde_json::from_str(&read(dir.path(), "input.json")).unwrap();
    assert_eq!(
        input,
        json!({"event": "before_tool", "session": "agent:main:test", "tool": "exec",
               "call_id": "call-1", "arguments": {"command": "ls -l"}})
    );
    let cwd = std::fs::canonicalize(read(dir.path(), "cwd").trim()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(dir.path()).unwrap());
}

#[tokio::test]
async fn failures_do_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let failing = [
        sh("echo 'boom' >&2; exit 1"),
        sh("kill -9 $$"),
        HookConfig {
            command: vec!["/nonexistent/chela-hook".into()],
            ..HookConfig::default()
        },
        HookConfig {
            command: Vec::new(),
            ..HookConfig::default()
        },
    ];
    for hook in failing {
        let label = format!("{:?}", hook.command);
        let hooks = before_tool(dir.path(), vec![hook]);
        let (out, ran) = check(&hooks, "ls").await;
        assert!(ran, "{label}");
        assert_eq!(out, ToolOutput::ok("ran"), "{label}");
    }
}

#[tokio::test]
async fn hooks_run_in_order_and_the_first_block_wins() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = before_tool(
        dir.path(),
        vec![
            sh("echo 1 >> order"),
            sh("echo 2 >> order; echo first >&2; exit 2"),
            sh("echo 3 >> order; echo second >&2; exit 2"),
        ],
    );
    let (out, ran) = check(&hooks, "ls").await;
    assert!(!ran);
    assert_eq!(out.text, "Blocked by hook: first");
    assert_eq!(read(dir.path(), "order"), "1\n2\n");
}

#[tokio::test]
async fn the_tools_list_limits_a_hook() {
    let dir = tempfile::tempdir().unwrap();
    let only_exec = HookConfig {
        tools: vec!["exec".into()],
        ..sh("echo no >&2; exit 2")
    };
    let hooks = before_tool(dir.path(), vec![only_exec]);
    let read_call = ToolCall {
        id: "call-2".into(),
        name: "read".into(),
        arguments: json!({"path": "x"}),
    };
    let (out, ran) = through(&hooks, &read_call, &CancellationToken::new()).await;
    assert!(ran);
    assert_eq!(out, ToolOutput::ok("ran"));
    let (out, ran) = check(&hooks, "ls").await;
    assert!(!ran);
    assert_eq!(out.text, "Blocked by hook: no");
}

#[tokio::test]
async fn after_hooks_get_the_result_and_their_output_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let config = HooksConfig {
        after_tool: vec![sh(
            r#"cat > after.json; echo '{"decision":"block"}'; exit 2"#,
        )],
        after_run: vec![sh("cat >> runs.jsonl; echo >> runs.jsonl")],
        ..HooksConfig::default()
    };
    let hooks = Hooks::new(config, dir.path().to_path_buf());
    let (out, ran) = check(&hooks, "ls").await;
    assert!(ran);
    assert_eq!(out, ToolOutput::ok("ran"));
    let after: Value = serde_json::from_str(&read(dir.path(), "after.json")).unwrap();
    assert_eq!(after["event"], "after_tool");
    assert_eq!(after["result"], "ran");
    assert_eq!(after["is_error"], false);
    assert_eq!(after["arguments"], json!({"command": "ls"}));

    let cancel = CancellationToken::new();
    hooks
        .after_run("agent:main:test", &RunStatus::Ok, "bye", &cancel)
        .await;
    let failed = RunStatus::Error(crate::domain::run::RunError::Model(
        "model error: 500".into(),
    ));
    hooks
        .after_run("agent:main:test", &failed, "", &cancel)
        .await;
    let runs: Vec<Value> = read(dir.path(), "runs.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        runs,
        [
            json!({"event": "after_run", "session": "agent:main:test", "status": "ok", "text": "bye"}),
            json!({"event": "after_run", "session": "agent:main:test", "status": "error",
                   "text": "", "error": "model error: 500"}),
        ]
    );
}

#[tokio::test]
async fn before_run_blocks_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = HooksConfig {
        before_run: vec![sh(
            r#"grep -q '"text":"secret' && { echo 'no secrets' >&2; exit 2; }; exit 0"#,
        )],
        ..HooksConfig::default()
    };
    let hooks = Hooks::new(config, dir.path().to_path_buf());
    let cancel = CancellationToken::new();
    assert_eq!(
        hooks.before_run("k", "secret plans", &cancel).await,
        Decision::Block("no secrets".into())
    );
    assert_eq!(
        hooks.before_run("k", "hello", &cancel).await,
        Decision::Allow
    );
    assert!(!hooks.is_empty());
    assert!(Hooks::default().is_empty());
}

#[tokio::test]
async fn a_timeout_kills_the_group_and_the_call_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let slow = HookConfig {
        timeout_s: 1,
        ..sh("sleep 30 & echo $! > pid; echo started; wait; exit 2")
    };
    let hooks = before_tool(dir.path(), vec![slow]);
    let (out, ran) = tokio::time::timeout(Duration::from_secs(20), check(&hooks, "ls"))
        .await
        .unwrap();
    assert!(ran);
    assert_eq!(out, ToolOutput::ok("ran"));
    let pid = read_pid(dir.path());
    assert!(
        gone_by(pid, Instant::now() + Duration::from_secs(5)).await,
        "backgrounded grandchild survived"
    );
}

#[tokio::test]
async fn cancelling_the_run_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ready");
    mkfifo(&fifo);
    let hooks = before_tool(
        dir.path(),
        vec![sh(
            "sleep 30 & echo $! > pid; echo go > ready; wait; exit 2",
        )],
    );
    let cancel = CancellationToken::new();
    let task = {
        let (hooks, cancel) = (hooks.clone(), cancel.clone());
        tokio::spawn(async move { through(&hooks, &exec_call("ls"), &cancel).await })
    };
    assert_eq!(read_fifo(&fifo).await, "go\n");
    cancel.cancel();
    let (_, ran) = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap();
    // Not blocked: the tool itself sees the cancellation and stops.
    assert!(ran);
    let pid = read_pid(dir.path());
    assert!(
        gone_by(pid, Instant::now() + Duration::from_secs(5)).await,
        "backgrounded grandchild survived"
    );
    // Nothing new starts once the run is stopped.
    let hooks = before_tool(dir.path(), vec![sh("touch started")]);
    let _ = through(&hooks, &exec_call("ls"), &cancel).await;
    assert!(!dir.path().join("started").exists());
}

#[tokio::test]
async fn a_script_file_is_run_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("guard.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ngrep -q 'rm ' && { echo \"no rm, args: $*\" >&2; exit 2; }\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = HookConfig {
        command: vec![script.display().to_string(), "a b".into(), "$HOME".into()],
        ..HookConfig::default()
    };
    let hooks = before_tool(dir.path(), vec![hook]);
    let (out, ran) = check(&hooks, "rm -rf data").await;
    assert!(!ran);
    assert_eq!(out.text, "Blocked by hook: no rm, args: a b $HOME");
    let (_, ran) = check(&hooks, "ls").await;
    assert!(ran);
}
