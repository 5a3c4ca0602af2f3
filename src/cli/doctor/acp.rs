//! `chela doctor`'s coding-agent check: start the agent as chela would (scrubbed environment
//! plus its `env`, under `[acp] sandbox`), send `initialize` and `session/new` over ACP's
//! newline-delimited JSON-RPC, and on failure show the end of what it wrote to stderr.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela::config::{Config, HarnessConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::remote::Verdict;

/// How long an agent has to answer both requests (npx may fetch its package first).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of the agent's stderr shown when it fails.
const STDERR_TAIL: usize = 12;

/// Starts `harness` in its folder and checks that it answers `initialize` and `session/new`
/// within `timeout`.
pub async fn starts(harness: &HarnessConfig, config: &Config, timeout: Duration) -> Verdict {
    let cwd = harness
        .cwd
        .clone()
        .filter(|dir| dir.is_dir())
        .or_else(|| Some(config.agent.workspace.clone()).filter(|dir| dir.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    let tcp = config.acp.network.connect_ports(&config.acp.allow_ports);
    let sandbox = chela::sandbox::ChildSandbox::from_config(config.acp.sandbox, tcp, config);
    let argv: Vec<std::ffi::OsString> = harness.command.iter().map(Into::into).collect();
    let argv = sandbox.argv(&argv);
    let Some((program, args)) = argv.split_first() else {
        return (false, "its command is empty".into());
    };
    let spawned = Command::new(program)
        .args(args)
        .env_clear()
        .envs(chela::sandbox::env::scrubbed(&[]))
        .envs(&harness.env)
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return (
                false,
                format!("cannot start {}: {e}", harness.command.join(" ")),
            );
        }
    };
    let (tail, reader) = collect_stderr(&mut child);
    let answered = tokio::time::timeout(timeout, handshake(&mut child, &cwd)).await;
    let exited = child.try_wait().ok().flatten();
    stop(&mut child).await;
    let (good, detail) = match answered {
        Ok(Ok(agent)) => return (true, format!("{agent} answered initialize and session/new")),
        Ok(Err(why)) => (false, why),
        Err(_) => (
            false,
            format!(
                "no answer to initialize and session/new within {}s",
                timeout.as_secs()
            ),
        ),
    };
    let mut detail = format!("`{}`: {detail}", harness.command.join(" "));
    if let Some(status) = exited {
        detail.push_str(&format!(" (it exited: {status})"));
    }
    // The pipe ends with the process (unless a child of it holds it open).
    let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
    let lines: Vec<String> = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    if lines.is_empty() {
        detail.push_str("; it wrote nothing to stderr");
    } else {
        detail.push_str("; its stderr ends:");
        for line in lines {
            detail.push_str(&format!("\n       | {line}"));
        }
    }
    (good, detail)
}

/// The last lines of stderr, shared with the task that reads them.
type Tail = Arc<Mutex<VecDeque<String>>>;

/// Keeps the last [`STDERR_TAIL`] lines the child writes to stderr; the task ends with the pipe.
fn collect_stderr(child: &mut Child) -> (Tail, tokio::task::JoinHandle<()>) {
    let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
    let stderr = child.stderr.take();
    let reader = {
        let tail = tail.clone();
        tokio::spawn(async move {
            let Some(stderr) = stderr else { return };
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        })
    };
    (tail, reader)
}

/// `initialize`, then `session/new` in `cwd`; the agent's name and version on success.
async fn handshake(child: &mut Child, cwd: &Path) -> Result<String, String> {
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("its pipes are missing".into());
    };
    let mut lines = BufReader::new(stdout).lines();
    let init = json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true},
        "clientInfo": {"name": "chela-doctor", "version": env!("CARGO_PKG_VERSION")},
    });
    let info = call(&mut stdin, &mut lines, 1, "initialize", init).await?;
    let agent = match (
        info["agentInfo"]["name"].as_str(),
        info["agentInfo"]["version"].as_str(),
    ) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name.to_owned(),
        _ => "it".to_owned(),
    };
    let session = json!({"cwd": cwd, "mcpServers": []});
    let made = call(&mut stdin, &mut lines, 2, "session/new", session).await?;
    if made["sessionId"].as_str().is_none() {
        return Err(format!("session/new answered without a sessionId: {made}"));
    }
    Ok(agent)
}

/// Sends request `id` and waits for its answer, skipping the agent's other messages.
async fn call(
    stdin: &mut ChildStdin,
    lines: &mut tokio::io::Lines<BufReader<ChildStdout>>,
    id: u64,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let written = stdin.write_all(format!("{request}\n").as_bytes()).await;
    if written.and(stdin.flush().await).is_err() {
        return Err(format!("closed its stdin before {method}"));
    }
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) | Err(_) => {
                return Err(format!("closed its stdout before answering {method}"));
            }
        };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            return Err(format!(
                "wrote a line that is not JSON-RPC on stdout: {line:.200}"
            ));
        };
        if message["id"] != json!(id) || message.get("method").is_some() {
            continue;
        }
        if let Some(error) = message.get("error") {
            return Err(format!("refused {method}: {error}"));
        }
        return Ok(message["result"].clone());
    }
}

/// Ends the agent and its process group.
async fn stop(child: &mut Child) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    if tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}
