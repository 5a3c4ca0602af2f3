//! Shared helpers for the end-to-end tests: a temp dir with a `config.toml` pointing at a
//! [`FakeModel`], the real `chela` binary run with a clean environment, a `chela chat` driver
//! that reads raw stdout with timeouts, and transcript helpers.

#![allow(dead_code)]

pub mod acp;
pub mod cluster;
pub mod discord;
pub mod pg;
pub mod slack;
pub mod telegram;

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_testkit::FakeModel;
use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

/// How long any single wait may take before the test fails (generous: loaded CI machines).
pub const WAIT: Duration = Duration::from_secs(20);

/// The terminal user's DM session key (USER=tester, default dm_scope).
pub const KEY: &str = "agent:main:terminal:direct:tester";

/// Which wire format the config points the binary at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI Chat Completions at `fake.openai_base_url()`.
    OpenAi,
    /// Anthropic Messages at `fake.base_url()`.
    Anthropic,
}

/// A temp dir with a config pointing at a running fake model.
pub struct Setup {
    /// The temp dir (HOME of every spawned process); holds `config.toml`, `data`, `ws`.
    pub dir: TempDir,
    /// The fake model server.
    pub fake: FakeModel,
}

impl Setup {
    /// OpenAI provider, queue `mode`, debounce 200 ms.
    pub async fn openai(mode: &str) -> Setup {
        Setup::start(Provider::OpenAi, mode, 200, "").await
    }

    /// A setup with `extra_model` lines appended to the `[model]` table.
    pub async fn start(
        provider: Provider,
        mode: &str,
        debounce_ms: u64,
        extra_model: &str,
    ) -> Setup {
        let fake = FakeModel::start().await.expect("start the fake model");
        let dir = tempfile::tempdir().expect("temp dir");
        let (name, base) = match provider {
            Provider::OpenAi => ("openai", fake.openai_base_url()),
            Provider::Anthropic => ("anthropic", fake.base_url()),
        };
        // Tests that stop a gateway mid-run expect the run cut there (it runs again at the
        // next start), so no shutdown grace; `durability.rs` sets one where it tests it.
        let config = format!(
            "[model]\nprovider = \"{name}\"\nbase_url = \"{base}\"\napi_key = \"test\"\n\
             {extra_model}\n[store]\npath = \"data\"\n[agent]\nworkspace = \"ws\"\nshutdown_grace_s = 0\n\
             [queue]\nmode = \"{mode}\"\ndebounce_ms = {debounce_ms}\n"
        );
        std::fs::write(dir.path().join("config.toml"), config).expect("write config");
        Setup { dir, fake }
    }

    /// A path inside the temp dir.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The config file.
    pub fn config(&self) -> PathBuf {
        self.path("config.toml")
    }

    /// `chela --config <config> <args>` with a clean environment.
    pub fn chela(&self, args: &[&str]) -> Command {
        let mut cmd = chela_command(self.dir.path());
        cmd.arg("--config").arg(self.config()).args(args);
        cmd
    }

    /// Runs `chela <args>` to completion with stdin closed.
    pub async fn run(&self, args: &[&str]) -> Output {
        run_to_end(self.chela(args)).await
    }

    /// Starts `chela chat`.
    pub fn chat(&self) -> Chat {
        Chat::spawn(self.chela(&["chat"]))
    }

    /// `chela agent --message <text> --json`: exit status and the parsed JSON line.
    pub async fn agent_json(&self, text: &str) -> (ExitStatus, Value) {
        let out = self.run(&["agent", "--message", text, "--json"]).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().last().unwrap_or_default();
        let json = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "agent --json printed no JSON ({e}): stdout {stdout:?}, stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status, json)
    }

    /// The exported transcript of `key`, one JSON value per line (header first).
    pub async fn export(&self, key: &str) -> Vec<Value> {
        let out = self.run(&["sessions", "export", key]).await;
        assert!(
            out.status.success(),
            "export failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("each exported line is JSON"))
            .collect()
    }

    /// Bodies of the model calls received so far (either wire format).
    pub fn model_calls(&self) -> Vec<Value> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r.path == "/v1/chat/completions" || r.path == "/v1/messages")
            .map(|r| r.body)
            .collect()
    }

    /// Waits until the fake model has received at least `n` requests.
    pub async fn wait_requests(&self, n: usize) {
        wait_until(&format!("{n} model requests"), || {
            self.fake.request_count() >= n
        })
        .await;
    }
}

/// A `chela` command with a clean environment: HOME is `home`, no provider variables.
pub fn chela_command(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chela"));
    cmd.env_clear()
        .env("HOME", home)
        .env("USER", "tester")
        .env("RUST_LOG", "warn")
        // Gateways of tests running side by side must not fight over the default RPC port.
        .env("CHELA_RPC_LISTEN", "127.0.0.1:0")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(home)
        .kill_on_drop(true);
    cmd
}

/// Runs `cmd` with stdin closed and output captured, failing the test after [`WAIT`].
pub async fn run_to_end(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("chela finished in time")
        .expect("spawn chela")
}

/// Polls `done` every 20 ms until it holds, failing the test after [`WAIT`].
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A running `chela chat` with piped stdin, stdout read raw and stderr collected.
pub struct Chat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    out: Vec<u8>,
    mark: usize,
    stderr: Arc<Mutex<Vec<u8>>>,
}

/// How a chat process ended.
pub struct Finished {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Chat {
    /// Spawns `cmd` (a `chela ... chat` command).
    pub fn spawn(mut cmd: Command) -> Chat {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn chela chat");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Chat {
            child,
            stdin,
            stdout,
            out: Vec::new(),
            mark: 0,
            stderr,
        }
    }

    /// Types `text` (one or more lines) into the chat.
    pub async fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        let line = format!("{text}\n");
        stdin.write_all(line.as_bytes()).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Closes stdin (Ctrl-D).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Everything printed so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits until stderr has a line containing `needle`; returns that line.
    pub async fn wait_stderr_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(line) = self.stderr_text().lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?} on stderr: {:?}",
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Reads stdout until `needle` appears after the previous match (raw bytes: partial,
    /// still-streaming lines count); returns the output from the previous match to here.
    pub async fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        let mut buf = [0u8; 4096];
        loop {
            let hay = &self.out[self.mark..];
            if let Some(pos) = hay
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
            {
                let end = self.mark + pos + needle.len();
                let seen = String::from_utf8_lossy(&self.out[self.mark..end]).into_owned();
                self.mark = end;
                return seen;
            }
            match tokio::time::timeout_at(deadline, self.stdout.read(&mut buf)).await {
                Ok(Ok(0)) => panic!(
                    "chat ended before printing {needle:?}; stdout {:?}, stderr {:?}",
                    self.output(),
                    self.stderr_text()
                ),
                Ok(Ok(n)) => self.out.extend_from_slice(&buf[..n]),
                Ok(Err(e)) => panic!("reading chat stdout: {e}"),
                Err(_) => panic!(
                    "timed out waiting for {needle:?}; stdout {:?}, stderr {:?}",
                    self.output(),
                    self.stderr_text()
                ),
            }
        }
    }

    /// Sends signal `name` (e.g. `TERM`, `INT`) to the process.
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("process still running");
        let sent = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{name} {pid}");
    }

    /// Closes stdin and waits for the process to exit; returns its whole output.
    pub async fn finish(mut self) -> Finished {
        self.close();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WAIT, self.stdout.read_to_end(&mut rest)).await;
        let status = tokio::time::timeout(WAIT, self.child.wait()).await;
        self.out.extend_from_slice(&rest);
        let (Ok(Ok(_)), Ok(Ok(status))) = (read, status) else {
            panic!(
                "chat did not exit after stdin closed; stdout {:?}, stderr {:?}",
                self.output(),
                self.stderr_text()
            );
        };
        // Let the stderr reader drain what the exited process left.
        for _ in 0..50 {
            if Arc::strong_count(&self.stderr) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Finished {
            status,
            stdout: self.output(),
            stderr: self.stderr_text(),
        }
    }

    /// SIGKILLs the process and waits for it; returns what it printed.
    pub async fn kill(mut self) -> String {
        self.child.start_kill().expect("send SIGKILL");
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("killed chat exits")
            .expect("wait");
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(WAIT, self.stdout.read_to_end(&mut rest)).await;
        self.out.extend_from_slice(&rest);
        self.output()
    }
}

/// Non-overlapping occurrences of `needle` in `hay`.
pub fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The `message` objects of a transcript, in order.
pub fn messages(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect()
}

/// The text of a transcript message (its text blocks joined).
pub fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// The toolCall blocks of an assistant message.
pub fn tool_calls(message: &Value) -> Vec<&Value> {
    message["content"]
        .as_array()
        .map(|blocks| blocks.iter().filter(|b| b["type"] == "toolCall").collect())
        .unwrap_or_default()
}

/// Asserts every toolCall is answered by a later toolResult with the same id; returns the
/// results by call id.
pub fn assert_paired(entries: &[Value]) -> Vec<(String, Value)> {
    let msgs = messages(entries);
    let mut pairs = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        for call in tool_calls(m) {
            let id = call["id"].as_str().expect("toolCall id").to_string();
            let result = msgs[i + 1..]
                .iter()
                .find(|r| r["role"] == "toolResult" && r["toolCallId"] == id.as_str())
                .unwrap_or_else(|| panic!("toolCall {id} has no toolResult: {entries:#?}"));
            pairs.push((id, (*result).clone()));
        }
    }
    pairs
}

/// The text of the last user message in an OpenAI Chat Completions request body.
pub fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}
