//! The `fake-mcp-server` binary, spawned as a child the way an MCP client runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use chela_testkit::mcp::jsonrpc::{call, request};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A generous bound so a broken server fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Server {
    fn spawn(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fake-mcp-server"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Server {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: Value) {
        let line = format!("{message}\n");
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(PATIENCE, self.stdout.next_line()).await;
        Some(serde_json::from_str(&line.unwrap().unwrap()?).unwrap())
    }

    async fn ask(&mut self, message: Value) -> Value {
        self.send(message).await;
        self.next().await.expect("an answer")
    }

    async fn exit(mut self) -> ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .unwrap()
            .unwrap()
    }
}

fn log_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn a_session_is_logged_and_stdin_eof_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let mut server = Server::spawn(&["--log", log.to_str().unwrap(), "--slow-start-ms", "20"]);
    let pid = server.child.id().unwrap();
    let init = server
        .ask(request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-03-26"}),
        ))
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    server
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = server.ask(request(2, "tools/list", json!({}))).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo", "add", "env", "read", "sleep", "fail", "big", "image", "crash"
        ]
    );

    server.send(call(3, "sleep", json!({"ms": 600_000}))).await;
    let echo = server
        .ask(call(4, "echo", json!({"text": "not held up"})))
        .await;
    assert_eq!(echo["id"], 4);
    let cancel = json!({"requestId": 3, "reason": "user"});
    server
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}))
        .await;
    let path = dir.path().join("file.txt");
    std::fs::write(&path, "contents").unwrap();
    let read = server.ask(call(5, "read", json!({"path": path}))).await;
    assert_eq!(
        (
            read["id"].clone(),
            read["result"]["content"][0]["text"].clone()
        ),
        (json!(5), json!("contents"))
    );
    let env = server
        .ask(call(6, "env", json!({"name": "CHELA_FAKE_MCP_UNSET"})))
        .await;
    assert_eq!(env["result"]["content"][0]["text"], "(unset)");

    assert!(server.exit().await.success());
    let want = [
        format!("start {pid}"),
        "initialize".into(),
        "notifications/initialized".into(),
        "tools/list".into(),
        "tools/call".into(),
        "call sleep".into(),
        "tools/call".into(),
        "call echo".into(),
        "notifications/cancelled".into(),
        "cancelled 3".into(),
        "tools/call".into(),
        "call read".into(),
        "tools/call".into(),
        "call env".into(),
    ];
    assert_eq!(log_lines(&log), want);
}

#[tokio::test]
async fn the_crash_tool_exits_3_without_answering() {
    let mut server = Server::spawn(&[]);
    server.send(call(1, "crash", json!({}))).await;
    assert_eq!(server.next().await, None);
    assert_eq!(server.exit().await.code(), Some(3));
}

#[tokio::test]
async fn crash_after_answers_then_exits_3() {
    let mut server = Server::spawn(&["--crash-after", "2"]);
    for id in 1..=2 {
        assert_eq!(
            server.ask(call(id, "echo", json!({"text": "x"}))).await["id"],
            id
        );
    }
    assert_eq!(server.next().await, None);
    assert_eq!(server.exit().await.code(), Some(3));
}

#[tokio::test]
async fn fail_starts_counts_down_then_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (log, fails) = (dir.path().join("log"), dir.path().join("fails"));
    std::fs::write(&fails, "1").unwrap();
    let args = [
        "--log",
        log.to_str().unwrap(),
        "--fail-starts",
        fails.to_str().unwrap(),
    ];
    assert_eq!(Server::spawn(&args).exit().await.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&fails).unwrap().trim(), "0");
    let mut server = Server::spawn(&args);
    assert_eq!(
        server.ask(request(1, "ping", json!({}))).await["result"],
        json!({})
    );
    assert!(server.exit().await.success());
    let lines = log_lines(&log);
    assert!(lines[0].starts_with("failed-start "), "{lines:?}");
    assert!(lines[1].starts_with("start "), "{lines:?}");
}

#[tokio::test]
async fn a_bad_flag_exits_2() {
    assert_eq!(Server::spawn(&["--bogus"]).exit().await.code(), Some(2));
}
