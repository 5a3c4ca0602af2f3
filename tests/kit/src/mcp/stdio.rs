//! The stdio transport: newline-delimited JSON-RPC in, one answer per line out. Each message
//! is handled in its own task, so a `sleep` does not hold up what comes after it.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::handler::{HandlerOptions, McpHandler, Reply};
use super::jsonrpc::{self, PARSE_ERROR};

/// How a stdio session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioEnd {
    /// The input ended: exit 0.
    Eof,
    /// The `crash` tool, or `crash_after` answers given: exit 3 at once.
    Crashed,
}

/// How the stdio server behaves.
#[derive(Clone, Default)]
pub struct StdioOptions {
    /// The protocol handler's options (`crash_tool` is normally on for stdio).
    pub handler: HandlerOptions,
    /// End with [`StdioEnd::Crashed`] after answering this many `tools/call` requests.
    pub crash_after: Option<u64>,
}

/// Serves MCP on `input`/`output` until the input ends or the server is to crash.
pub async fn serve_stdio<R, W>(
    input: R,
    mut output: W,
    options: StdioOptions,
) -> io::Result<StdioEnd>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let handler = McpHandler::new(options.handler);
    let (replies, mut replied) = mpsc::unbounded_channel::<(Reply, bool)>();
    let mut lines = BufReader::new(input).lines();
    let mut calls_answered = 0;
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else {
                    handler.cancel_all();
                    return Ok(StdioEnd::Eof);
                };
                if let Some(answer) = dispatch(&handler, &line, &replies) {
                    write_line(&mut output, &answer).await?;
                }
            }
            Some((reply, is_call)) = replied.recv() => match reply {
                Reply::Answer(answer) => {
                    write_line(&mut output, &answer).await?;
                    calls_answered += u64::from(is_call);
                    if is_call && Some(calls_answered) == options.crash_after {
                        return Ok(StdioEnd::Crashed);
                    }
                }
                Reply::Silent => {}
                Reply::Crash => return Ok(StdioEnd::Crashed),
            },
        }
    }
}

/// Starts handling one line; returns an answer to write now (a parse error) if any.
fn dispatch(
    handler: &McpHandler,
    line: &str,
    replies: &mpsc::UnboundedSender<(Reply, bool)>,
) -> Option<Value> {
    if line.trim().is_empty() {
        return None;
    }
    let message: Value = match serde_json::from_str(line) {
        Ok(message) => message,
        Err(_) => return Some(jsonrpc::error(&Value::Null, PARSE_ERROR, "Parse error")),
    };
    let is_call = message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message.get("id").is_some();
    let work = handler.handle(message);
    let replies = replies.clone();
    tokio::spawn(async move {
        // Err: the session ended; nobody is left to answer.
        let _ = replies.send((work.await, is_call));
    });
    None
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, message: &Value) -> io::Result<()> {
    let mut line = message.to_string();
    line.push('\n');
    output.write_all(line.as_bytes()).await?;
    output.flush().await
}
