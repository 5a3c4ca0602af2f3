//! The agent's stdio transport and its method log.
//!
//! The transport is the crate's [`Lines`] over tokio's stdin and stdout, not
//! `ByteStreams`, for two reasons: every incoming line passes [`MethodLog`]
//! before the SDK parses it (so the log holds even methods nobody handles, such
//! as `$/cancel_request`), and stdout sits behind one lock that [`Output`] can
//! also write through, so `noreply-close` can put a last chunk on the wire and
//! know it is flushed before the process exits.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Lines;
use futures_util::{Sink, Stream};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Stdout};
use tokio::sync::Mutex;

/// Appends one JSON line per received message to the file named by
/// `FAKE_ACP_LOG`; does nothing when the variable is unset.
#[derive(Clone, Debug, Default)]
pub struct MethodLog {
    path: Option<Arc<PathBuf>>,
}

impl MethodLog {
    /// The log named by `FAKE_ACP_LOG`, if set and non-empty.
    pub fn from_env() -> Self {
        let path = std::env::var_os("FAKE_ACP_LOG")
            .filter(|value| !value.is_empty())
            .map(|value| Arc::new(PathBuf::from(value)));
        Self { path }
    }

    /// Records an incoming wire line if it is a request or notification:
    /// `{"method": .., "sessionId": ..}` (`sessionId` is null when absent), with the
    /// `mcpServers` of `session/new` and `session/load`.
    pub fn record_line(&self, line: &str) {
        if self.path.is_none() {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return;
        };
        let session_id = message
            .pointer("/params/sessionId")
            .cloned()
            .unwrap_or(Value::Null);
        let mut entry = json!({ "method": method, "sessionId": session_id });
        if let Some(servers) = message.pointer("/params/mcpServers") {
            entry["mcpServers"] = servers.clone();
        }
        self.append(&entry);
    }

    /// Records the client's answer to a request the agent sent:
    /// `{"reply": method, "sessionId": .., "outcome": ..}`.
    pub fn record_reply(&self, method: &str, session_id: &str, outcome: &str) {
        self.append(&json!({ "reply": method, "sessionId": session_id, "outcome": outcome }));
    }

    /// Records the content blocks of a prompt: `{"prompt": sessionId, "blocks": ..}`.
    pub fn record_prompt(&self, session_id: &str, blocks: &Value) {
        self.append(&json!({ "prompt": session_id, "blocks": blocks }));
    }

    fn append(&self, entry: &Value) {
        let Some(path) = &self.path else {
            return;
        };
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.as_ref())
            .and_then(|mut file| writeln!(file, "{entry}"));
        if let Err(error) = written {
            eprintln!("fake-acp-agent: cannot write {}: {error}", path.display());
        }
    }
}

/// The process's stdout, shared by the SDK's outgoing lines and raw writes.
#[derive(Clone, Debug)]
pub struct Output {
    stdout: Arc<Mutex<Stdout>>,
}

impl Output {
    /// Wraps this process's stdout.
    pub fn stdout() -> Self {
        Self {
            stdout: Arc::new(Mutex::new(tokio::io::stdout())),
        }
    }

    /// Writes one line (a newline is added) and flushes it.
    pub async fn write_line(&self, line: &str) -> std::io::Result<()> {
        let mut stdout = self.stdout.lock().await;
        stdout.write_all(line.as_bytes()).await?;
        stdout.write_all(b"\n").await?;
        stdout.flush().await
    }
}

/// The SDK transport: lines read from stdin (each logged first) and lines
/// written to `output`.
pub fn stdio_transport(
    output: Output,
    log: MethodLog,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let outgoing = futures_util::sink::unfold(output, async |output, line: String| {
        output.write_line(&line).await?;
        Ok::<_, std::io::Error>(output)
    });
    let lines = BufReader::new(tokio::io::stdin()).lines();
    let incoming = futures_util::stream::unfold(Some((lines, log)), async |state| {
        let (mut lines, log) = state?;
        match lines.next_line().await {
            Ok(Some(line)) => {
                log.record_line(&line);
                Some((Ok(line), Some((lines, log))))
            }
            Ok(None) => None,
            Err(error) => Some((Err(error), None)),
        }
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}
