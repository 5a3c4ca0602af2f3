//! Tests of foreground `exec` with `pty: true`, through the tool interface.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent::tools::exec::ExecTool;
use crate::agent::tools::process::test_support::{gone_by, mkfifo, read_fifo, read_pid};
use crate::agent::tools::test_support::ctx;
use crate::agent::tools::{Tool, ToolOutput};

async fn exec(dir: &Path, args: Value) -> ToolOutput {
    ExecTool::default().call(args, &ctx(dir)).await
}

#[tokio::test]
async fn pipes_are_not_a_terminal_and_a_pty_is() {
    let dir = tempfile::tempdir().unwrap();
    let command = "if test -t 1; then echo tty; else echo pipe; fi; stty size 2>/dev/null || true";
    let out = exec(dir.path(), json!({"command": command})).await;
    assert_eq!(out, ToolOutput::ok("pipe\n[exit code 0]"));
    let out = exec(dir.path(), json!({"command": command, "pty": true})).await;
    assert_eq!(out, ToolOutput::ok("tty\n30 120\n[exit code 0]"));
    let sized = json!({"command": command, "pty": true, "cols": 80, "rows": 10});
    let out = exec(dir.path(), sized).await;
    assert_eq!(out, ToolOutput::ok("tty\n10 80\n[exit code 0]"));
}

#[tokio::test]
async fn env_workdir_and_exit_code_apply_on_a_pty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let args = json!({"command": "printf '\\033[31m%s\\033[0m\\n' \"$GREETING\"; basename \"$(pwd)\"; exit 4",
                      "workdir": "sub", "env": {"GREETING": "hi"}, "pty": true});
    let out = exec(dir.path(), args).await;
    assert_eq!(out, ToolOutput::ok("hi\nsub\n[exit code 4]"));
    let out = exec(
        dir.path(),
        json!({"command": "pwd", "workdir": "/", "pty": true}),
    )
    .await;
    assert!(
        out.is_error && out.text.contains("outside the workspace"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn long_pty_output_keeps_head_and_tail_with_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "seq 1 300000; echo done", "pty": true});
    let out = exec(dir.path(), args).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.starts_with("1\n2\n3\n"), "{}", &out.text[..50]);
    assert!(out.text.ends_with("300000\ndone\n[exit code 0]"));
    assert!(
        out.text.contains("bytes omitted of 1988900 bytes total"),
        "marker missing"
    );
    assert!(out.text.chars().count() < 10_100);
}

#[tokio::test]
async fn timeout_kills_a_backgrounded_grandchild_within_two_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "sleep 30 & echo $! > pid; echo started; wait",
                      "timeout": 0.5, "pty": true});
    let timeout_at = Instant::now() + Duration::from_millis(500);
    let out = tokio::time::timeout(Duration::from_secs(20), exec(dir.path(), args))
        .await
        .unwrap();
    assert_eq!(
        out,
        ToolOutput::error("started\n[timed out after 0.5 s; the command was killed]")
    );
    let pid = read_pid(dir.path());
    assert!(
        gone_by(pid, timeout_at + Duration::from_secs(2)).await,
        "backgrounded grandchild {pid} survived the timeout"
    );
}

#[tokio::test]
async fn cancel_ends_a_pty_command_and_its_group_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ready");
    mkfifo(&fifo);
    let ctx = ctx(dir.path());
    let cancel = ctx.cancel.clone();
    let args = json!({"command": "sleep 30 & echo $! > pid; echo go > ready; wait",
                      "pty": true});
    let call = tokio::spawn(async move { ExecTool::default().call(args, &ctx).await });
    assert_eq!(read_fifo(&fifo).await, "go\n");
    let cancelled_at = Instant::now();
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        ToolOutput::error("(no output)\n[cancelled; the command was killed]")
    );
    let pid = read_pid(dir.path());
    assert!(
        gone_by(pid, cancelled_at + Duration::from_secs(2)).await,
        "backgrounded grandchild {pid} survived the cancel"
    );
}

#[tokio::test]
async fn dropping_a_pty_call_kills_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ready");
    mkfifo(&fifo);
    let ctx = ctx(dir.path());
    let args = json!({"command": "sleep 30 & echo $! > pid; echo go > ready; wait",
                      "pty": true});
    let call = tokio::spawn(async move { ExecTool::default().call(args, &ctx).await });
    assert_eq!(read_fifo(&fifo).await, "go\n");
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    let pid = read_pid(dir.path());
    assert!(gone_by(pid, Instant::now() + Duration::from_secs(2)).await);
}
