//! `exec`: run a shell command in the workspace, output captured, bounded by a timeout; on a
//! PTY with `pty: true` ([`pty`]), or left running with `background: true` ([`background`]).

mod args;
mod background;
mod pty;

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::capture::Capture;
use super::group::{Group, KILL_GRACE};
use super::paths::resolve_in_workspace;
use super::process::ProcessRegistry;
use super::{Tool, ToolContext, ToolOutput, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};
use args::ExecArgs;

/// Runs `sh -c command`: `{command, workdir?, env?, timeout?, pty?, cols?, rows?,
/// background?}`.
///
/// The command runs in its own process group (on a PTY: its own session). In the foreground
/// stdout and stderr are captured together (stdin closed on pipes); on timeout or
/// cancellation the whole group gets SIGTERM, then SIGKILL after 1 s. In the background it
/// goes to the shared [`ProcessRegistry`] that the `process` tool reads and drives.
#[derive(Clone, Default)]
pub struct ExecTool {
    registry: Arc<ProcessRegistry>,
}

impl ExecTool {
    /// A tool starting its background processes in `registry`.
    pub fn new(registry: Arc<ProcessRegistry>) -> Self {
        ExecTool { registry }
    }
}

impl Tool for ExecTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "exec".to_string(),
            description: "Run a shell command (sh -c) in the workspace and return its combined \
                          stdout and stderr and exit code. Nothing is typed into it (use \
                          background for input). The command and everything it starts are \
                          killed at the timeout. Long output keeps the head and tail. pty: true runs it on a terminal (for programs \
                          that need a TTY; escape sequences are removed from the output). \
                          background: true returns at once with a process id (proc-N) for the \
                          process tool - use it for servers, watchers and interactive programs \
                          (with pty: true); a background command runs until it ends, is \
                          killed, or its timeout (only if given) passes."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Shell command line"},
                    "workdir": {"type": "string", "description": "Directory to run in, relative to the workspace (default: the workspace)"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables"},
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds before the command is killed"},
                    "pty": {"type": "boolean", "description": "Run on a pseudo-terminal (default false)"},
                    "cols": {"type": "integer", "minimum": 1, "description": "PTY width (default 120)"},
                    "rows": {"type": "integer", "minimum": 1, "description": "PTY height (default 30)"},
                    "background": {"type": "boolean", "description": "Return at once with a process id for the process tool (default false)"}
                },
                "required": ["command"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let a = match parse_args(&args, args::parse) {
                Ok(a) => a,
                Err(out) => return out,
            };
            let dir: PathBuf = match &a.workdir {
                None => ctx.workspace.clone(),
                Some(w) => match resolve_in_workspace(&ctx.workspace, w) {
                    Ok(dir) if dir.is_dir() => dir,
                    Ok(_) => return ToolOutput::error(format!("workdir {w} is not a directory")),
                    Err(e) => return ToolOutput::error(e.to_string()),
                },
            };
            match (a.background, a.pty) {
                (true, _) => background::start(&a, &dir, &ctx.exec, &self.registry),
                (false, Some(size)) => pty::run(&a, &dir, size, ctx).await,
                (false, None) => run(&a, &dir, ctx).await,
            }
        })
    }
}

/// How the wait for the shell ended.
enum Ended {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn run(a: &ExecArgs, dir: &std::path::Path, ctx: &ToolContext) -> ToolOutput {
    let timeout = a.timeout.unwrap_or(ctx.exec_timeout);
    let capture = Capture::for_chars(ctx.max_output_chars);
    let mut group = match Group::spawn(&a.command, dir, &a.env, &ctx.exec, capture) {
        Ok(group) => group,
        Err(e) => return ToolOutput::error(format!("cannot start `sh -c`: {e}")),
    };
    let ended = tokio::select! {
        status = group.child.wait() => Ended::Exited(status),
        () = tokio::time::sleep(timeout) => Ended::TimedOut,
        () = ctx.cancel.cancelled() => Ended::Cancelled,
    };
    let (status_line, is_error) = match ended {
        Ended::Exited(Ok(status)) => {
            let mut line = describe(status);
            if !group.finished(KILL_GRACE).await {
                group.stop().await;
                line.push_str(LEFTOVER_KILLED);
            }
            (line, false)
        }
        Ended::Exited(Err(e)) => {
            group.stop().await;
            (format!("[could not wait for the command: {e}]"), true)
        }
        Ended::TimedOut => {
            group.stop().await;
            (timed_out(timeout), true)
        }
        Ended::Cancelled => {
            group.stop().await;
            (CANCELLED.to_string(), true)
        }
    };
    report(
        group.take_output(),
        &status_line,
        is_error,
        ctx.max_output_chars,
    )
}

/// Appended when the shell exited but processes it started still held the output.
const LEFTOVER_KILLED: &str = "\n[background processes still holding the output were killed; \
                               redirect their output (cmd > file 2>&1 &) to keep them, or use \
                               background: true]";
/// The status line of a cancelled call.
const CANCELLED: &str = "[cancelled; the command was killed]";

/// The status line of a call that timed out.
fn timed_out(timeout: Duration) -> String {
    let secs = timeout.as_secs_f64();
    format!("[timed out after {secs} s; the command was killed]")
}

/// The output (or `(no output)`), then the status line.
fn report(output: Capture, status_line: &str, is_error: bool, max_chars: usize) -> ToolOutput {
    let mut text = if output.is_empty() {
        "(no output)".to_string()
    } else {
        output.into_text(max_chars)
    };
    let trimmed = text.trim_end_matches('\n').len();
    text.truncate(trimmed);
    text.push('\n');
    text.push_str(status_line);
    ToolOutput {
        text,
        is_error,
        images: Vec::new(),
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("[exit code {code}]"),
        (None, Some(signal)) => format!("[killed by signal {signal}]"),
        (None, None) => format!("[{status}]"),
    }
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
