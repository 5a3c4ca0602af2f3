//! A child process in its own process group, its combined output read concurrently, and
//! stopping the whole group (SIGTERM, then SIGKILL) when a call times out or is cancelled.

use std::io::{self, pipe};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::capture::Capture;

/// How long the group gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(1);

/// A running `sh -c` whose stdout and stderr share one pipe (order preserved) that a task
/// drains into a bounded [`Capture`], so a chatty process never blocks on a full pipe.
pub(crate) struct Group {
    /// The shell; killed on drop.
    pub(crate) child: Child,
    pgid: Option<Pid>,
    output: Arc<Mutex<Capture>>,
    reader: Option<JoinHandle<()>>,
    /// True once the group was stopped or ended on its own; otherwise dropping kills it.
    settled: bool,
}

impl Group {
    /// Starts `sh -c command` in `dir` with stdin null, in a new process group.
    pub(crate) fn spawn(
        command: &str,
        dir: &Path,
        env: &[(String, String)],
        capture: Capture,
    ) -> io::Result<Group> {
        let (read_end, write_end) = pipe()?;
        let mut cmd = Command::new("sh");
        // chela's own secrets (bot tokens...) are not for commands a model chose.
        for name in crate::config::chela_secrets_present() {
            cmd.env_remove(name);
        }
        cmd.arg("-c")
            .arg(command)
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(write_end.try_clone()?)
            .stderr(write_end)
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn()?;
        // Drop our copies of the write end, or the pipe never reaches end-of-file.
        drop(cmd);
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let mut receiver = match Receiver::from_owned_fd(read_end.into()) {
            Ok(receiver) => receiver,
            Err(e) => {
                if let Some(pgid) = pgid {
                    let _ = killpg(pgid, Signal::SIGKILL);
                }
                return Err(e);
            }
        };
        let output = Arc::new(Mutex::new(capture));
        let sink = Arc::clone(&output);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n @ 1..) = receiver.read(&mut buf).await {
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&buf[..n]);
            }
        });
        Ok(Group {
            child,
            pgid,
            output,
            reader: Some(reader),
            settled: false,
        })
    }

    /// After the shell exited: waits up to `grace` for the output pipe to close (every holder
    /// exited). True if it did; the group is then left alone, as processes that detached from
    /// the output are not this call's to kill.
    pub(crate) async fn finished(&mut self, grace: Duration) -> bool {
        self.settled = self.output_closed(grace).await;
        self.settled
    }

    async fn output_closed(&mut self, grace: Duration) -> bool {
        match self.reader.as_mut() {
            None => true,
            Some(reader) => {
                let closed = tokio::time::timeout(grace, reader).await.is_ok();
                if closed {
                    self.reader = None;
                }
                closed
            }
        }
    }

    /// Stops the whole group: SIGTERM, up to [`KILL_GRACE`] for the shell to exit and the
    /// output to close, then SIGKILL to whatever is left, and reaps the shell.
    pub(crate) async fn stop(&mut self) {
        self.signal(Signal::SIGTERM);
        let _ = tokio::time::timeout(KILL_GRACE, async {
            let _ = self.child.wait().await;
            self.output_closed(KILL_GRACE).await;
        })
        .await;
        // Unconditional: a no-op for a group that is gone, and it also catches members that
        // ignored SIGTERM after closing or redirecting their output.
        self.signal(Signal::SIGKILL);
        let _ = tokio::time::timeout(KILL_GRACE, self.child.wait()).await;
        self.output_closed(Duration::from_millis(200)).await;
        self.settled = true;
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (group already gone) is the expected outcome once everything exited.
            let _ = killpg(pgid, signal);
        }
    }

    /// The output captured so far, leaving an empty capture behind.
    pub(crate) fn take_output(&mut self) -> Capture {
        let mut guard = self.output.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *guard)
    }
}

impl Drop for Group {
    /// A call dropped mid-run (its future abandoned) still takes its whole group down.
    fn drop(&mut self) {
        if !self.settled {
            self.signal(Signal::SIGKILL);
        }
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}
