//! A `sh -c` command on a PTY (its own session) or on pipes (its own process group) whose
//! output a reader thread pushes into a [`Sink`] and whose exit a waiter thread reports. Used
//! by foreground PTY `exec` and by background processes, which outlive the call.

mod start;

use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use portable_pty::MasterPty;
use tokio::sync::watch;

use super::ansi::AnsiFilter;
use crate::sandbox::{ExecSandbox, ProcessGroup};
use start::{Started, read_output, start_pipes, start_pty};

/// How long a stopped job gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = super::group::KILL_GRACE;

/// How long reading an ended job's status waits for the rest of its output.
const SETTLE: Duration = Duration::from_millis(500);

/// The time source of exit stamps (injectable so tests can move time).
pub(crate) type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// The real clock.
pub(crate) fn system_clock() -> Clock {
    Arc::new(Instant::now)
}

/// Where a job's output goes.
pub(crate) trait Sink: Send + 'static {
    /// Appends bytes.
    fn push(&mut self, data: &[u8]);
}

impl Sink for super::capture::Capture {
    fn push(&mut self, data: &[u8]) {
        super::capture::Capture::push(self, data);
    }
}

/// What the command is connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Terminal {
    /// stdin a pipe; stdout and stderr one shared pipe.
    Pipes,
    /// A pseudo-terminal of this size; the command leads its own session on it.
    Pty {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
}

/// What to run.
pub(crate) struct JobSpec<'a> {
    /// The `sh -c` command line.
    pub(crate) command: &'a str,
    /// Working directory (already confined to the workspace).
    pub(crate) dir: &'a Path,
    /// Extra environment variables (on top of the scrubbed environment).
    pub(crate) env: &'a [(String, String)],
    /// The environment and confinement commands start with.
    pub(crate) sandbox: &'a ExecSandbox,
    /// Pipes or a PTY.
    pub(crate) terminal: Terminal,
    /// Keep a way to write to the command's input (else a PTY's input is never written and
    /// the pipe's is closed).
    pub(crate) input: bool,
}

/// How a job's shell ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobExit {
    /// Exit code, when it exited.
    pub(crate) code: Option<i32>,
    /// Signal name, when a signal ended it.
    pub(crate) signal: Option<String>,
    /// When the waiter saw it end (by the job's clock).
    pub(crate) at: Instant,
}

impl JobExit {
    /// `exit code 3`, `killed by signal SIGTERM`.
    pub(crate) fn describe(&self) -> String {
        match (self.code, &self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "ended (status unknown)".to_string(),
        }
    }
}

/// How far the output has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Progress {
    /// Bytes pushed into the sink so far.
    bytes: u64,
    /// True once every holder of the output closed it.
    closed: bool,
}

/// Why writing to a job's input failed; the text is what the model reads after the job id.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// The input was closed (C-d on pipes, or the command closed it).
    #[error("its input is closed")]
    Closed,
    /// The write itself failed (the command exited, a broken pipe…).
    #[error("cannot write to its input: {0}")]
    Write(#[source] io::Error),
}

/// A running (or finished) command. Dropping a job whose group may still run kills the group.
pub(crate) struct Job {
    pid: u32,
    group: ProcessGroup,
    pty: bool,
    exit: watch::Receiver<Option<JobExit>>,
    progress: watch::Receiver<Progress>,
    input: Mutex<Option<Box<dyn Write + Send>>>,
    /// Kept open so the PTY lives as long as the job.
    _master: Option<Mutex<Box<dyn MasterPty + Send>>>,
}

impl Job {
    /// Starts the command; its output goes to `sink`, exit times come from `clock`.
    pub(crate) fn spawn<S: Sink>(
        spec: &JobSpec<'_>,
        sink: Arc<Mutex<S>>,
        clock: Clock,
    ) -> io::Result<Job> {
        let (exit_tx, exit) = watch::channel(None);
        let (progress_tx, progress) = watch::channel(Progress::default());
        let started = match spec.terminal {
            Terminal::Pipes => start_pipes(spec)?,
            Terminal::Pty { cols, rows } => start_pty(spec, cols, rows)?,
        };
        let Started {
            pid,
            reader,
            input,
            master,
            waiter,
        } = started;
        let filter = master.is_some().then(AnsiFilter::default);
        let job = Job {
            pid,
            group: ProcessGroup::led_by(Some(pid)),
            pty: master.is_some(),
            exit,
            progress,
            input: Mutex::new(input),
            _master: master.map(Mutex::new),
        };
        // From here on a failure drops `job`, which kills the group.
        std::thread::Builder::new()
            .name("exec-output".to_string())
            .spawn(move || read_output(reader, filter, &sink, &progress_tx))?;
        std::thread::Builder::new()
            .name("exec-wait".to_string())
            .spawn(move || {
                let (code, signal) = waiter();
                let _ = exit_tx.send(Some(JobExit {
                    code,
                    signal,
                    at: clock(),
                }));
            })?;
        Ok(job)
    }

    /// The shell's process id (also its process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// True when the command runs on a PTY.
    pub(crate) fn is_pty(&self) -> bool {
        self.pty
    }

    /// How the shell ended, once it has.
    pub(crate) fn exit(&self) -> Option<JobExit> {
        self.exit.borrow().clone()
    }

    /// Waits until the shell has ended.
    pub(crate) async fn wait(&self) -> JobExit {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(done) => done.clone().unwrap_or_else(unknown_exit),
            // The waiter thread is gone without a word; treat the job as ended.
            Err(_) => unknown_exit(),
        }
    }

    /// Resolves once the shell has ended, without holding on to the job.
    pub(crate) fn on_exit(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut exit = self.exit.clone();
        async move {
            let _ = exit.wait_for(Option::is_some).await;
        }
    }

    /// Waits up to `grace` for every holder of the output to close it. True if they did.
    pub(crate) async fn output_closed(&self, grace: Duration) -> bool {
        let mut progress = self.progress.clone();
        tokio::time::timeout(grace, progress.wait_for(|p| p.closed))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Once the shell has ended, waits a moment for the rest of its output, so what is read
    /// next is complete (unless something it started still holds the output).
    pub(crate) async fn settle(&self) {
        if self.exit.borrow().is_some() {
            self.output_closed(SETTLE).await;
        }
    }

    /// Waits until there is output past `seen` bytes, or the job ended.
    pub(crate) async fn changed(&self, seen: u64) {
        let mut progress = self.progress.clone();
        let mut exit = self.exit.clone();
        tokio::select! {
            _ = progress.wait_for(|p| p.bytes > seen || p.closed) => {}
            _ = exit.wait_for(Option::is_some) => {}
        }
    }

    /// True once the shell ended and nothing holds the output any more: the group is then
    /// left alone (its id may be reused; members that detached from the output are not ours).
    pub(crate) fn finished(&self) -> bool {
        self.exit.borrow().is_some() && self.progress.borrow().closed
    }

    /// Sends `signal` to the whole group unless the job is done.
    pub(crate) fn signal(&self, signal: Signal) {
        if !self.finished() {
            self.group.signal(signal);
        }
    }

    /// Stops the whole group (see [`ProcessGroup::stop`]): the shell's exit and the output
    /// closing count as settled.
    pub(crate) async fn stop(&self) {
        if self.finished() {
            return;
        }
        self.group
            .stop(async {
                self.wait().await;
                self.output_closed(KILL_GRACE).await;
            })
            .await;
        let _ = tokio::time::timeout(KILL_GRACE, self.wait()).await;
        self.output_closed(Duration::from_millis(200)).await;
    }

    /// Writes `data` to the command's input (blocking; call off the async threads).
    pub(crate) fn write_input(&self, data: &[u8]) -> Result<(), InputError> {
        let mut input = self.input.lock().unwrap_or_else(|e| e.into_inner());
        let Some(writer) = input.as_mut() else {
            return Err(InputError::Closed);
        };
        writer
            .write_all(data)
            .and_then(|()| writer.flush())
            .map_err(InputError::Write)
    }

    /// Closes a piped input so the command reads end-of-file.
    pub(crate) fn close_input(&self) {
        self.input.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl Drop for Job {
    /// A job dropped while its group may still run (a call abandoned, the registry dropped at
    /// gateway shutdown) takes the whole group down.
    fn drop(&mut self) {
        // A finished group is left alone (its id may be reused); else the armed group kills.
        if self.finished() {
            self.group.disarm();
        }
    }
}

fn unknown_exit() -> JobExit {
    JobExit {
        code: None,
        signal: None,
        at: Instant::now(),
    }
}
