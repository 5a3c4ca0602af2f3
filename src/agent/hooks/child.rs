//! One hook process: started without a shell in its own process group, one JSON object on
//! stdin then end-of-file, stdout and stderr read (bounded), the whole group killed on timeout
//! or cancellation.

use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Bytes kept of a hook's stdout and of its stderr; the rest is read and dropped.
const MAX_CAPTURE: usize = 16 * 1024;
use crate::sandbox::{ChildSandbox, GRACE, ProcessGroup};

/// A hook that ran to its end.
#[derive(Debug)]
pub(crate) struct Finished {
    /// How it exited.
    pub(crate) status: ExitStatus,
    /// What it printed on stdout (at most [`MAX_CAPTURE`] bytes, lossy UTF-8).
    pub(crate) stdout: String,
    /// What it printed on stderr (at most [`MAX_CAPTURE`] bytes, lossy UTF-8).
    pub(crate) stderr: String,
}

/// Why a hook did not run to its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    /// The hook has no program.
    #[error("the hook has no command")]
    NoCommand,
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The I/O error.
        source: io::Error,
    },
    /// Waiting for the process failed.
    #[error("cannot wait for the hook: {0}")]
    Wait(io::Error),
    /// It (or a process holding its output) outlived its timeout.
    #[error("timed out after {} s; its process group was killed", .0.as_secs_f64())]
    TimedOut(Duration),
    /// The run was stopped while the hook ran.
    #[error("the run was stopped; its process group was killed")]
    Cancelled,
}

/// Runs `command` (program and arguments) in `cwd` with `input` on stdin, from the scrubbed
/// environment plus the variables named in `pass_env`, confined as `sandbox` says. It ends
/// when the program exited and its stdout and stderr closed; after `timeout`, or when
/// `cancel` fires, the whole process group is stopped.
pub(crate) async fn run(
    sandbox: &ChildSandbox,
    command: &[String],
    pass_env: &[String],
    cwd: &Path,
    input: &[u8],
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<Finished, HookError> {
    let Some(program) = command.first() else {
        return Err(HookError::NoCommand);
    };
    let argv: Vec<std::ffi::OsString> = command.iter().map(Into::into).collect();
    let argv = sandbox.argv(&argv);
    let (start, args) = argv.split_first().ok_or(HookError::NoCommand)?;
    let mut cmd = Command::new(start);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(crate::sandbox::env::scrubbed(pass_env))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = spawn(&mut cmd).await.map_err(|source| HookError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut group = ProcessGroup::led_by(child.id());
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook may exit without reading its input (EPIPE): that is its choice.
            let _ = stdin.write_all(input).await;
            let _ = stdin.shutdown().await;
        }
    };
    let work = async {
        let ((), stdout, stderr, status) =
            tokio::join!(feed, capped(stdout), capped(stderr), child.wait());
        (status, stdout, stderr)
    };
    let ended = tokio::select! {
        done = tokio::time::timeout(timeout, work) => done.map_err(|_| HookError::TimedOut(timeout)),
        () = cancel.cancelled() => Err(HookError::Cancelled),
    };
    match ended {
        Ok((Ok(status), stdout, stderr)) => {
            // Ended on its own with its output closed: what it left detached is its own.
            group.disarm();
            Ok(Finished {
                status,
                stdout,
                stderr,
            })
        }
        Ok((Err(e), ..)) => {
            drop(group);
            Err(HookError::Wait(e))
        }
        Err(e) => {
            group
                .stop(async {
                    let _ = child.wait().await;
                })
                .await;
            let _ = tokio::time::timeout(GRACE, child.wait()).await;
            Err(e)
        }
    }
}

/// Reads `pipe` to its end, keeping the first [`MAX_CAPTURE`] bytes.
async fn capped(pipe: Option<impl AsyncRead + Unpin>) -> String {
    let mut kept = Vec::new();
    if let Some(mut pipe) = pipe {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut buf).await {
            let room = MAX_CAPTURE.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Tries a spawn that failed with "text file busy" again, a few times: a script written
/// just before (by the agent's file tools, or a test) stays open for writing in any child
/// another thread forked meanwhile, until that child's exec closes it.
async fn spawn(cmd: &mut Command) -> io::Result<tokio::process::Child> {
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && attempt < BUSY_TRIES => {
                attempt += 1;
                tokio::time::sleep(BUSY_PAUSE * attempt).await;
            }
            spawned => return spawned,
        }
    }
}

/// Tries after "text file busy".
const BUSY_TRIES: u32 = 5;
/// The pause before the first of them (the next ones wait longer).
const BUSY_PAUSE: Duration = Duration::from_millis(10);
