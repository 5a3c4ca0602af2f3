//! A child process in its own process group, its combined output read concurrently, and
//! stopping the whole group (SIGTERM, then SIGKILL) when a call times out or is cancelled.

use std::io::{self, pipe};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::capture::Capture;
use crate::sandbox::{ExecSandbox, ProcessGroup};

/// How long the group gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = crate::sandbox::GRACE;

/// A running `sh -c` whose stdout and stderr share one pipe (order preserved) that a task
/// drains into a bounded [`Capture`], so a chatty process never blocks on a full pipe.
pub(crate) struct Group {
    /// The shell; killed on drop.
    pub(crate) child: Child,
    /// Disarmed once the group was stopped or ended on its own; otherwise dropping kills it.
    group: ProcessGroup,
    output: Arc<Mutex<Capture>>,
    reader: Option<JoinHandle<()>>,
}

impl Group {
    /// Starts `sh -c command` in `dir` with stdin null, in a new process group, from the
    /// scrubbed environment plus `env`, confined as `sandbox` says.
    pub(crate) fn spawn(
        command: &str,
        dir: &Path,
        env: &[(String, String)],
        sandbox: &ExecSandbox,
        capture: Capture,
    ) -> io::Result<Group> {
        let argv = sandbox.argv(command, env).map_err(io::Error::other)?;
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        let (read_end, write_end) = pipe()?;
        crate::sandbox::signals::let_children_take_interrupts();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(dir)
            .env_clear()
            .envs(sandbox.env())
            .envs(sandbox.process_env(env).iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(write_end.try_clone()?)
            .stderr(write_end)
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn()?;
        // Drop our copies of the write end, or the pipe never reaches end-of-file.
        drop(cmd);
        // From here on an early return drops the group, which kills it.
        let group = ProcessGroup::led_by(child.id());
        let mut receiver = Receiver::from_owned_fd(read_end.into())?;
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
            group,
            output,
            reader: Some(reader),
        })
    }

    /// After the shell exited: waits up to `grace` for the output pipe to close (every holder
    /// exited). True if it did; the group is then left alone, as processes that detached from
    /// the output are not this call's to kill.
    pub(crate) async fn finished(&mut self, grace: Duration) -> bool {
        let settled = output_closed(&mut self.reader, grace).await;
        if settled {
            self.group.disarm();
        }
        settled
    }

    /// Stops the whole group (see [`ProcessGroup::stop`]): the shell's exit and the output
    /// closing count as settled; then reaps the shell.
    pub(crate) async fn stop(&mut self) {
        let Group {
            child,
            group,
            reader,
            ..
        } = self;
        group
            .stop(async {
                let _ = child.wait().await;
                output_closed(reader, KILL_GRACE).await;
            })
            .await;
        let _ = tokio::time::timeout(KILL_GRACE, self.child.wait()).await;
        output_closed(&mut self.reader, Duration::from_millis(200)).await;
        self.group.disarm();
    }

    /// The output captured so far, leaving an empty capture behind.
    pub(crate) fn take_output(&mut self) -> Capture {
        let mut guard = self.output.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *guard)
    }
}

/// Waits up to `grace` for the output reader to end (every holder closed the pipe).
async fn output_closed(reader: &mut Option<JoinHandle<()>>, grace: Duration) -> bool {
    match reader.as_mut() {
        None => true,
        Some(task) => {
            let closed = tokio::time::timeout(grace, task).await.is_ok();
            if closed {
                *reader = None;
            }
            closed
        }
    }
}

impl Drop for Group {
    /// A call dropped mid-run (its future abandoned) still takes its whole group down (the
    /// armed [`ProcessGroup`] does).
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}
