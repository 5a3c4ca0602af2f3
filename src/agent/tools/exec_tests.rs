//! Tests of the `exec` tool with real short-lived processes.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::agent::tools::process::test_support::{gone_by, read_pid};
use crate::agent::tools::test_support::ctx;

/// True once `pid` is gone, within the 2 s the spec allows.
async fn wait_gone(pid: i32) -> bool {
    gone_by(pid, Instant::now() + Duration::from_secs(2)).await
}

async fn exec(dir: &Path, args: Value) -> ToolOutput {
    ExecTool::default().call(args, &ctx(dir)).await
}

#[tokio::test]
async fn output_and_exit_code_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(
        dir.path(),
        json!({"command": "echo out; echo err >&2; exit 3"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("out\nerr\n[exit code 3]"));
    let out = exec(dir.path(), json!({"command": "true"})).await;
    assert_eq!(out, ToolOutput::ok("(no output)\n[exit code 0]"));
}

#[tokio::test]
async fn workdir_and_env_apply() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let args = json!({"command": "echo \"$GREETING\"; basename \"$(pwd)\"; cat 0<&0 || true",
                      "workdir": "sub", "env": {"GREETING": "hi", "N": 5}});
    let out = exec(dir.path(), args).await;
    assert_eq!(out, ToolOutput::ok("hi\nsub\n[exit code 0]"));
    let out = exec(dir.path(), json!({"command": "pwd", "workdir": ".."})).await;
    assert!(
        out.is_error && out.text.contains("outside the workspace"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn chatty_output_is_drained_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), json!({"command": "seq 1 300000; echo done"})).await;
    assert!(!out.is_error);
    assert!(out.text.starts_with("1\n2\n3\n"), "{}", &out.text[..50]);
    assert!(out.text.ends_with("300000\ndone\n[exit code 0]"));
    assert!(
        out.text.contains("bytes omitted of 1988900 bytes total"),
        "marker missing"
    );
    assert!(out.text.chars().count() < 10_100);
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "sleep 30 & echo $! > pid; echo started; wait", "timeout_s": 0.5});
    let out = tokio::time::timeout(Duration::from_secs(20), exec(dir.path(), args))
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.text,
        "started\n[timed out after 0.5 s; the command was killed]"
    );
    assert!(
        wait_gone(read_pid(dir.path())).await,
        "backgrounded grandchild survived"
    );
}

#[tokio::test]
async fn cancel_returns_promptly_and_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ready");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let ctx = ctx(dir.path());
    let cancel = ctx.cancel.clone();
    let args = json!({"command": "sleep 30 & echo $! > pid; echo go > ready; wait"});
    let call = tokio::spawn(async move { ExecTool::default().call(args, &ctx).await });
    // Opening the FIFO for reading blocks until the command has written the pid and opened it.
    let ready = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo));
    assert_eq!(ready.await.unwrap().unwrap(), "go\n");
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        ToolOutput::error("(no output)\n[cancelled; the command was killed]")
    );
    assert!(
        wait_gone(read_pid(dir.path())).await,
        "backgrounded grandchild survived"
    );
}

#[tokio::test]
async fn background_process_holding_output_is_stopped_after_exit() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"command": "sleep 30 & echo $! > pid; echo hi"});
    let out = tokio::time::timeout(Duration::from_secs(20), exec(dir.path(), args))
        .await
        .unwrap();
    assert!(!out.is_error);
    assert!(
        out.text
            .starts_with("hi\n[exit code 0]\n[background processes"),
        "{}",
        out.text
    );
    assert!(wait_gone(read_pid(dir.path())).await);
}

#[tokio::test]
async fn spawn_failure_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("removed");
    let out = exec(&gone, json!({"command": "true"})).await;
    assert!(
        out.is_error && out.text.starts_with("cannot start"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), json!({"command": "true", "timeout_s": -1})).await;
    assert!(out.is_error && out.text.contains("timeout_s"));
    let out = exec(dir.path(), json!({"timeout_s": 1})).await;
    assert!(out.is_error && out.text.contains("`command`"));
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ready");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let ctx = ctx(dir.path());
    let args = json!({"command": "sleep 30 & echo $! > pid; echo go > ready; wait"});
    let call = tokio::spawn(async move { ExecTool::default().call(args, &ctx).await });
    let ready = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo));
    assert_eq!(ready.await.unwrap().unwrap(), "go\n");
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(
        wait_gone(read_pid(dir.path())).await,
        "backgrounded grandchild survived"
    );
}
