//! `exec` with `background: true`: the command goes to the shared [`ProcessRegistry`] and the
//! call returns its id at once. It outlives the run (a `/stop` does not end it); an explicit
//! `timeout` still kills it.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::ExecArgs;
use crate::agent::tools::ToolOutput;
use crate::agent::tools::job::{JobSpec, Terminal};
use crate::agent::tools::process::ProcessRegistry;
use crate::sandbox::ExecSandbox;

/// Starts `a.command` in `dir` as a background process of `registry`.
pub(super) fn start(
    a: &ExecArgs,
    dir: &Path,
    sandbox: &ExecSandbox,
    registry: &ProcessRegistry,
) -> ToolOutput {
    let spec = JobSpec {
        command: &a.command,
        dir,
        env: &a.env,
        sandbox,
        terminal: match a.pty {
            Some((cols, rows)) => Terminal::Pty { cols, rows },
            None => Terminal::Pipes,
        },
        input: true,
    };
    let proc = match registry.start(&spec) {
        Ok(proc) => proc,
        Err(msg) => return ToolOutput::error(msg),
    };
    if let Some(timeout) = a.timeout {
        watchdog(Arc::downgrade(&proc), proc.job.on_exit(), timeout);
    }
    let on = if proc.job.is_pty() {
        "on a PTY"
    } else {
        "on pipes"
    };
    ToolOutput::ok(format!(
        "started {id} in the background ({on}, pid {pid}). Use the process tool with id \
         \"{id}\": poll for its status and new output, log for older output, write or \
         send-keys for input, kill to stop it. It keeps running after this run ends{until}.",
        id = proc.id,
        pid = proc.job.pid(),
        until = match a.timeout {
            Some(t) => format!(", until it ends or {} s have passed", t.as_secs_f64()),
            None => ", until it ends or is killed".to_string(),
        },
    ))
}

/// Stops the process once `timeout` has passed, unless it ended first.
fn watchdog(
    proc: Weak<crate::agent::tools::process::Proc>,
    ended: impl Future<Output = ()> + Send + 'static,
    timeout: Duration,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = ended => {}
            () = tokio::time::sleep(timeout) => {
                if let Some(proc) = proc.upgrade().filter(|p| p.job.exit().is_none()) {
                    proc.timed_out.store(true, Ordering::Relaxed);
                    proc.job.stop().await;
                }
            }
        }
    });
}
