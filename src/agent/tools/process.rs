//! `process`: list, read and drive the background processes `exec` started
//! (`background: true`), held in a [`ProcessRegistry`] shared with the `exec` tool.

mod buffer;
mod keys;
mod registry;

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Map, Value, json};

pub(crate) use registry::Proc;
pub use registry::{Limits, ProcessRegistry};

use super::args::ArgError;
use super::truncate::{head_tail, take_head};
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};
use keys::KeyAction;

/// Longest a `poll` may wait for output, in seconds.
const MAX_POLL_WAIT_S: f64 = 120.0;
/// Lines `log` shows when no `limit` is given.
const DEFAULT_LOG_LINES: usize = 200;
/// How long a write to a process's input may block before the call gives up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The `process` tool: `{action, id?, ...}` over the shared [`ProcessRegistry`].
pub struct ProcessTool {
    registry: Arc<ProcessRegistry>,
}

impl ProcessTool {
    /// A tool over `registry` (the one the `exec` tool starts processes in).
    pub fn new(registry: Arc<ProcessRegistry>) -> Self {
        ProcessTool { registry }
    }
}

/// One parsed call.
enum Action {
    List,
    Poll { wait: Option<Duration> },
    Log { offset: Option<usize>, limit: usize },
    Write { data: String },
    SendKeys { keys: Vec<String> },
    Kill,
}

impl Tool for ProcessTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "process".to_string(),
            description: format!(
                "Manage background processes started by exec with background: true. Actions: \
                 list; poll (status and the output that is new since the last poll; timeout \
                 waits up to that many seconds for output or exit); log (the kept output by \
                 lines: offset is the first line, 1-based, limit the number of lines, default \
                 the last {DEFAULT_LOG_LINES}); write (raw text to its input); send-keys (a list \
                 of key names - {} - or literal text, e.g. [\"1+1\", \"Enter\"]); kill (the \
                 whole process group). Each process keeps the newest {} KiB of output; finished \
                 ones are forgotten after {} min. Processes survive the end or /stop of a run.",
                keys::KEY_NAMES,
                self.registry.limits().buffer_bytes / 1024,
                self.registry.limits().ttl.as_secs() / 60,
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["list", "poll", "log", "write", "send-keys", "kill"]},
                    "id": {"type": "string", "description": "Process id from exec, e.g. proc-1 (all actions but list)"},
                    "timeout": {"type": "number", "minimum": 0, "description": "poll: seconds to wait for new output or exit (default 0)"},
                    "offset": {"type": "integer", "minimum": 1, "description": "log: first line, 1-based (default: the last `limit` lines)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "log: most lines"},
                    "data": {"type": "string", "description": "write: text sent as is (add \\n yourself)"},
                    "keys": {"type": "array", "items": {"type": "string"}, "description": "send-keys: key names and literal text, in order"}
                },
                "required": ["action"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let (action, id) = match parse_args(&args, parse) {
                Ok(parsed) => parsed,
                Err(out) => return out,
            };
            let proc = match (&action, id) {
                (Action::List, _) => return self.list(),
                (_, None) => return ToolOutput::error("argument `id` (e.g. proc-1) is required"),
                (_, Some(id)) => match self.registry.get(&id) {
                    Ok(proc) => proc,
                    Err(msg) => return ToolOutput::error(msg),
                },
            };
            match action {
                Action::List => self.list(),
                Action::Poll { wait } => self.poll(&proc, wait, ctx).await,
                Action::Log { offset, limit } => {
                    proc.job.settle().await;
                    self.log(&proc, offset, limit, ctx)
                }
                Action::Write { data } => write(&proc, data.into_bytes()).await,
                Action::SendKeys { keys } => self.send_keys(&proc, &keys).await,
                Action::Kill => self.kill(&proc).await,
            }
        })
    }
}

fn parse(m: &Map<String, Value>) -> Result<(Action, Option<String>), ArgError> {
    let id = args::optional_str(m, "id")?.map(|s| s.trim().to_string());
    let action = match args::required_str(m, "action")? {
        "list" => Action::List,
        "poll" => Action::Poll {
            wait: match args::optional_f64(m, "timeout")? {
                None => None,
                Some(s) if (0.0..=MAX_POLL_WAIT_S).contains(&s) => Some(Duration::from_secs_f64(s)),
                Some(s) => {
                    return Err(ArgError::invalid(format!(
                        "argument `timeout` must be 0 to {MAX_POLL_WAIT_S} seconds, got {s}"
                    )));
                }
            },
        },
        "log" => Action::Log {
            offset: match args::optional_u64(m, "offset")? {
                Some(0) => {
                    return Err(ArgError::invalid(
                        "argument `offset` is 1-based: use 1 or more",
                    ));
                }
                o => o.map(|o| usize::try_from(o).unwrap_or(usize::MAX)),
            },
            limit: match args::optional_u64(m, "limit")? {
                Some(0) => return Err(ArgError::invalid("argument `limit` must be at least 1")),
                l => l.map_or(DEFAULT_LOG_LINES, |l| {
                    usize::try_from(l).unwrap_or(usize::MAX)
                }),
            },
        },
        "write" => Action::Write {
            data: args::required_str(m, "data")?.to_string(),
        },
        "send-keys" | "send_keys" | "sendKeys" => Action::SendKeys {
            keys: match m.get("keys") {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .ok_or(ArgError::invalid(
                        "argument `keys` must be a list of strings",
                    ))?,
                _ => {
                    return Err(ArgError::invalid(
                        "argument `keys` must be a list of strings",
                    ));
                }
            },
        },
        "kill" => Action::Kill,
        other => {
            return Err(ArgError::invalid(format!(
                "unknown action {other:?}; use list, poll, log, write, send-keys or kill"
            )));
        }
    };
    Ok((action, id))
}

impl ProcessTool {
    fn list(&self) -> ToolOutput {
        let procs = self.registry.list();
        if procs.is_empty() {
            return ToolOutput::ok("(no background processes)");
        }
        let now = self.registry.now();
        let lines: Vec<String> = procs
            .iter()
            .map(|p| {
                let mut command = take_head(&p.command, 100).to_string();
                if command.len() < p.command.len() {
                    command.push('…');
                }
                format!("{}: {}", status(p, now), command)
            })
            .collect();
        ToolOutput::ok(lines.join("\n"))
    }

    async fn poll(&self, proc: &Proc, wait: Option<Duration>, ctx: &ToolContext) -> ToolOutput {
        let seen = *proc.cursor.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            tokio::select! {
                () = proc.job.changed(seen) => {}
                () = tokio::time::sleep(wait) => {}
                () = ctx.cancel.cancelled() => {}
            }
        }
        // The status is taken before the output is read: an exit it reports was seen before
        // `settle` waited for the rest of the output, so the output below is all of it (a
        // process ending in between shows as running, and the next poll has its end).
        let mut text = format!("[{}]\n", status(proc, self.registry.now()));
        proc.job.settle().await;
        let mut cursor = proc.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let (lost, mut bytes) = proc.output().since(*cursor);
        if !proc.job.finished() {
            bytes.truncate(buffer::complete_utf8_len(&bytes));
        }
        *cursor += lost + bytes.len() as u64;
        drop(cursor);
        if lost > 0 {
            text.push_str(&format!(
                "[... {lost} bytes of output were dropped before this poll; the buffer keeps \
                 the newest {} bytes ...]\n",
                self.registry.limits().buffer_bytes
            ));
        }
        if bytes.is_empty() {
            text.push_str("(no new output)");
        } else {
            let budget = ctx.max_output_chars.saturating_sub(text.chars().count());
            text.push_str(&head_tail(&String::from_utf8_lossy(&bytes), budget));
        }
        ToolOutput::ok(text)
    }

    fn log(
        &self,
        proc: &Proc,
        offset: Option<usize>,
        limit: usize,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let (kept, dropped) = {
            let output = proc.output();
            (output.kept(), output.dropped())
        };
        let kept = String::from_utf8_lossy(&kept);
        let lines: Vec<&str> = kept.split_inclusive('\n').collect();
        let n = lines.len();
        let start = match offset {
            Some(o) if o > n && !(o == 1 && n == 0) => {
                return ToolOutput::error(format!(
                    "offset {o} is past the end: {} has {n} lines of output",
                    proc.id
                ));
            }
            Some(o) => o - 1,
            None => n.saturating_sub(limit),
        };
        let end = start.saturating_add(limit).min(n);
        let mut text = format!("[{}]\n", status(proc, self.registry.now()));
        if n == 0 {
            text.push_str("(no output)");
            return ToolOutput::ok(text);
        }
        text.push_str(&format!("[lines {}-{end} of {n}", start + 1));
        if dropped > 0 {
            text.push_str(&format!(
                "; {dropped} older bytes were dropped, line 1 is the oldest kept"
            ));
        }
        text.push_str("]\n");
        let body: String = lines[start..end].concat();
        let budget = ctx.max_output_chars.saturating_sub(text.chars().count());
        text.push_str(&head_tail(&body, budget));
        ToolOutput::ok(text)
    }

    async fn send_keys(&self, proc: &Arc<Proc>, keys: &[String]) -> ToolOutput {
        let actions = match keys::translate(keys, proc.job.is_pty()) {
            Ok(actions) => actions,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        for action in actions {
            match action {
                KeyAction::Bytes(bytes) => {
                    let out = write(proc, bytes).await;
                    if out.is_error {
                        return out;
                    }
                }
                KeyAction::Interrupt => proc.job.signal(Signal::SIGINT),
                KeyAction::CloseInput => proc.job.close_input(),
            }
        }
        ToolOutput::ok(format!(
            "sent {} to {}; poll to see what it does",
            keys.join(" "),
            proc.id
        ))
    }

    async fn kill(&self, proc: &Proc) -> ToolOutput {
        if proc.job.finished() {
            return ToolOutput::ok(format!(
                "{} has already ended: {}",
                proc.id,
                status(proc, self.registry.now())
            ));
        }
        proc.job.stop().await;
        ToolOutput::ok(format!(
            "killed the process group; {}",
            status(proc, self.registry.now())
        ))
    }
}

/// Writes `data` to the process's input off the async threads, giving up after a while.
async fn write(proc: &Arc<Proc>, data: Vec<u8>) -> ToolOutput {
    if let Some(exit) = proc.job.exit() {
        return ToolOutput::error(format!(
            "{} has ended ({}); nothing reads its input",
            proc.id,
            exit.describe()
        ));
    }
    let len = data.len();
    let target = Arc::clone(proc);
    let task = tokio::task::spawn_blocking(move || target.job.write_input(&data));
    match tokio::time::timeout(WRITE_TIMEOUT, task).await {
        Ok(Ok(Ok(()))) => ToolOutput::ok(format!("wrote {len} bytes to {}", proc.id)),
        Ok(Ok(Err(msg))) => ToolOutput::error(format!("{}: {msg}", proc.id)),
        Ok(Err(e)) => ToolOutput::error(format!("{}: the write failed: {e}", proc.id)),
        Err(_) => ToolOutput::error(format!(
            "{} is not reading its input (the write blocked for {} s)",
            proc.id,
            WRITE_TIMEOUT.as_secs()
        )),
    }
}

/// `proc-1: running for 3 s (pid 123, pty)`, `proc-1: exit code 0 after 2 s, 5 min ago`.
fn status(proc: &Proc, now: Instant) -> String {
    let pty = if proc.job.is_pty() { ", pty" } else { "" };
    match proc.job.exit() {
        None => format!(
            "{}: running for {} (pid {}{pty})",
            proc.id,
            human(now.saturating_duration_since(proc.started)),
            proc.job.pid()
        ),
        Some(exit) => {
            let why = if proc.timed_out() { ", timed out" } else { "" };
            format!(
                "{}: {}{why} after {}, {} ago",
                proc.id,
                exit.describe(),
                human(exit.at.saturating_duration_since(proc.started)),
                human(now.saturating_duration_since(exit.at))
            )
        }
    }
}

/// `3 s`, `4 min`, `2 h`.
fn human(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
