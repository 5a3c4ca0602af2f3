//! `exec`: run a shell command in the workspace, output captured, bounded by a timeout.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::capture::Capture;
use super::group::{Group, KILL_GRACE};
use super::paths::resolve_in_workspace;
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// Longest timeout a call may ask for (one day).
const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Runs `sh -c command`: `{command, workdir?, env?, timeout_s?}`.
///
/// The command runs in its own process group with stdin closed; stdout and stderr are captured
/// together. On timeout or cancellation the whole group gets SIGTERM, then SIGKILL after 1 s.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExecTool;

struct ExecArgs {
    command: String,
    workdir: Option<String>,
    env: Vec<(String, String)>,
    timeout: Option<Duration>,
}

impl Tool for ExecTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "exec".to_string(),
            description: "Run a shell command (sh -c) in the workspace and return its combined \
                          stdout and stderr and exit code. stdin is closed. The command and \
                          everything it starts are killed at the timeout. Long output keeps \
                          the head and tail."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Shell command line"},
                    "workdir": {"type": "string", "description": "Directory to run in, relative to the workspace (default: the workspace)"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables"},
                    "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds before the command is killed"}
                },
                "required": ["command"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match parse_args(&args, parse) {
                Ok(a) => run(a, ctx).await,
                Err(out) => out,
            }
        })
    }
}

fn parse(m: &Map<String, Value>) -> Result<ExecArgs, String> {
    let env = match m.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(format!("env value of `{k}` must be a string")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("argument `env` must be an object of strings".to_string()),
    };
    let timeout = match args::optional_f64(m, "timeout_s")? {
        None => None,
        Some(s) if s > 0.0 && s <= MAX_TIMEOUT_S => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(format!(
                "argument `timeout_s` must be above 0 and at most {MAX_TIMEOUT_S}, got {s}"
            ));
        }
    };
    Ok(ExecArgs {
        command: args::required_str(m, "command")?.to_string(),
        workdir: args::optional_str(m, "workdir")?.map(str::to_string),
        env,
        timeout,
    })
}

/// How the wait for the shell ended.
enum Ended {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Cancelled,
}

async fn run(a: ExecArgs, ctx: &ToolContext) -> ToolOutput {
    let dir: PathBuf = match &a.workdir {
        None => ctx.workspace.clone(),
        Some(w) => match resolve_in_workspace(&ctx.workspace, w) {
            Ok(dir) if dir.is_dir() => dir,
            Ok(_) => return ToolOutput::error(format!("workdir {w} is not a directory")),
            Err(msg) => return ToolOutput::error(msg),
        },
    };
    let timeout = a.timeout.unwrap_or(ctx.exec_timeout);
    let capture = Capture::for_chars(ctx.max_output_chars);
    let mut group = match Group::spawn(&a.command, &dir, &a.env, capture) {
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
                line.push_str(
                    "\n[background processes still holding the output were killed; \
                     redirect their output (cmd > file 2>&1 &) to keep them]",
                );
            }
            (line, false)
        }
        Ended::Exited(Err(e)) => {
            group.stop().await;
            (format!("[could not wait for the command: {e}]"), true)
        }
        Ended::TimedOut => {
            group.stop().await;
            let secs = timeout.as_secs_f64();
            (
                format!("[timed out after {secs} s; the command was killed]"),
                true,
            )
        }
        Ended::Cancelled => {
            group.stop().await;
            ("[cancelled; the command was killed]".to_string(), true)
        }
    };
    let output = group.take_output();
    let mut text = if output.is_empty() {
        "(no output)".to_string()
    } else {
        output.into_text(ctx.max_output_chars)
    };
    let trimmed = text.trim_end_matches('\n').len();
    text.truncate(trimmed);
    text.push('\n');
    text.push_str(&status_line);
    ToolOutput { text, is_error }
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
