//! Foreground `exec` on a PTY: the command leads its own session on a fresh terminal, its
//! output (escape sequences removed) keeps head and tail, and timeout or cancellation kill
//! the whole group.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{CANCELLED, ExecArgs, LEFTOVER_KILLED, report, timed_out};
use crate::agent::tools::capture::Capture;
use crate::agent::tools::job::{Job, JobSpec, KILL_GRACE, Terminal, system_clock};
use crate::agent::tools::{ToolContext, ToolOutput};

/// Runs `a.command` on a `cols` x `rows` PTY in `dir` and waits for it.
pub(super) async fn run(
    a: &ExecArgs,
    dir: &Path,
    (cols, rows): (u16, u16),
    ctx: &ToolContext,
) -> ToolOutput {
    let timeout = a.timeout.unwrap_or(ctx.exec_timeout);
    let capture = Arc::new(Mutex::new(Capture::for_chars(ctx.max_output_chars)));
    let spec = JobSpec {
        command: &a.command,
        dir,
        env: &a.env,
        sandbox: &ctx.exec,
        terminal: Terminal::Pty { cols, rows },
        input: false,
    };
    // Dropped with the call (even an abandoned one), the job kills its group.
    let job = match Job::spawn(&spec, Arc::clone(&capture), system_clock()) {
        Ok(job) => job,
        Err(e) => return ToolOutput::error(format!("cannot start `sh -c` on a terminal: {e}")),
    };
    let ended = tokio::select! {
        exit = job.wait() => Some(exit),
        () = tokio::time::sleep(timeout) => None,
        () = ctx.cancel.cancelled() => {
            job.stop().await;
            let output = std::mem::take(&mut *capture.lock().unwrap_or_else(|e| e.into_inner()));
            return report(output, CANCELLED, true, ctx.max_output_chars);
        }
    };
    let (status_line, is_error) = match ended {
        Some(exit) => {
            let mut line = format!("[{}]", exit.describe());
            if !job.output_closed(KILL_GRACE).await {
                job.stop().await;
                line.push_str(LEFTOVER_KILLED);
            }
            (line, false)
        }
        None => {
            job.stop().await;
            (timed_out(timeout), true)
        }
    };
    let output = std::mem::take(&mut *capture.lock().unwrap_or_else(|e| e.into_inner()));
    report(output, &status_line, is_error, ctx.max_output_chars)
}

#[cfg(test)]
#[path = "pty_tests.rs"]
mod tests;
