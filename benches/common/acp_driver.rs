//! [`RawAgent`]: a minimal hand-written ACP client for the `acp` bench's baseline. It speaks
//! newline-delimited JSON-RPC 2.0 over the agent's stdio with blocking reads and writes, and
//! uses no chela code and no ACP crate, so the time it measures is (nearly) the agent's own.
//!
//! Requests the agent sends to the client (it should send none for plain-text turns) are
//! answered with a method-not-found error; `session/update` notifications are counted, and the
//! text of `agent_message_chunk` updates is collected as the turn's reply.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::BenchResult;

/// How long [`RawAgent::close`] waits for the agent to exit after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// One agent process driven over its stdio.
pub struct RawAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
    /// `session/update` notifications received so far.
    pub updates: usize,
}

impl RawAgent {
    /// Starts `argv` in `cwd` with `env` added, in its own process group, stderr discarded.
    pub fn spawn(
        argv: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> BenchResult<RawAgent> {
        let (program, args) = argv.split_first().ok_or("empty agent command")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin pipe")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        Ok(RawAgent {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            next_id: 0,
            line: String::new(),
            updates: 0,
        })
    }

    /// Sends request `method` and reads until its response; returns the `result`. Text of
    /// `agent_message_chunk` updates seen meanwhile is appended to `text`.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
        text: &mut String,
    ) -> BenchResult<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send(&message)?;
        loop {
            let message = self.read()?;
            let is_response = message.get("method").is_none();
            if is_response {
                if message.get("id").and_then(Value::as_u64) != Some(id) {
                    continue;
                }
                if let Some(error) = message.get("error") {
                    return Err(format!("{method} failed: {error}").into());
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
            if let Some(request_id) = message.get("id") {
                // A request from the agent: nothing here serves fs/terminal/permissions.
                let answer = json!({
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": { "code": -32601, "message": "method not found" },
                });
                self.send(&answer)?;
                continue;
            }
            if message["method"] == "session/update" {
                self.updates += 1;
                let update = &message["params"]["update"];
                if update["sessionUpdate"] == "agent_message_chunk"
                    && let Some(chunk) = update["content"]["text"].as_str()
                {
                    text.push_str(chunk);
                }
            }
        }
    }

    /// `initialize` (protocol version 1, no client capabilities); returns the result.
    pub fn initialize(&mut self) -> BenchResult<Value> {
        let params = json!({
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": { "readTextFile": false, "writeTextFile": false },
                "terminal": false,
            },
            "clientInfo": { "name": "acp-bench-raw", "version": "0" },
        });
        self.request("initialize", params, &mut String::new())
    }

    /// `session/new` in `cwd`; returns the session id.
    pub fn new_session(&mut self, cwd: &Path) -> BenchResult<String> {
        let params = json!({ "cwd": cwd, "mcpServers": [] });
        let result = self.request("session/new", params, &mut String::new())?;
        result["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("session/new returned no sessionId: {result}").into())
    }

    /// `session/load` of session `id` in `cwd` (the replayed history is counted, not kept).
    pub fn load_session(&mut self, id: &str, cwd: &Path) -> BenchResult {
        let params = json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
        self.request("session/load", params, &mut String::new())?;
        Ok(())
    }

    /// One `session/prompt` turn with `text`; returns the streamed reply and the stop reason.
    pub fn prompt(&mut self, session: &str, text: &str) -> BenchResult<(String, String)> {
        let params = json!({
            "sessionId": session,
            "prompt": [{ "type": "text", "text": text }],
        });
        let mut reply = String::new();
        let result = self.request("session/prompt", params, &mut reply)?;
        let stop = result["stopReason"].as_str().unwrap_or("?").to_owned();
        Ok((reply, stop))
    }

    /// Closes the agent's stdin, waits up to [`EXIT_GRACE`] for it to exit, then kills its
    /// process group.
    pub fn close(mut self) -> BenchResult {
        drop(self.stdin.take());
        let started = Instant::now();
        while started.elapsed() < EXIT_GRACE {
            if self.child.try_wait()?.is_some() {
                kill_group(self.child.id());
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        kill_group(self.child.id());
        self.child.wait()?;
        Ok(())
    }

    fn send(&mut self, message: &Value) -> BenchResult {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()?;
        Ok(())
    }

    fn read(&mut self) -> BenchResult<Value> {
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                return Err("the agent closed its stdout".into());
            }
            let line = self.line.trim();
            if line.is_empty() {
                continue;
            }
            return Ok(serde_json::from_str(line)?);
        }
    }
}

impl Drop for RawAgent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}

/// SIGKILL to process group `pid` (ignoring a group that is already gone).
pub fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
