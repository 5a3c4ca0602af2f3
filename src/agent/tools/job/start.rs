//! Starting a job's command: on pipes in a new process group, or on a fresh PTY in a new
//! session; and the loop that reads its output.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::Mutex;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::sync::watch;

use super::{JobSpec, Progress, Sink};
use crate::agent::tools::ansi::AnsiFilter;

/// A started command before its threads exist.
pub(super) struct Started {
    pub(super) pid: u32,
    pub(super) reader: Box<dyn Read + Send>,
    pub(super) input: Option<Box<dyn Write + Send>>,
    pub(super) master: Option<Box<dyn MasterPty + Send>>,
    /// Blocks until the shell ends: (exit code, signal name).
    pub(super) waiter: Box<dyn FnOnce() -> (Option<i32>, Option<String>) + Send>,
}

/// The program and arguments of `spec`'s command (through the sandbox's trampoline).
fn argv(spec: &JobSpec<'_>) -> io::Result<(OsString, Vec<OsString>)> {
    let mut argv = spec
        .sandbox
        .argv(spec.command, spec.env)
        .map_err(io::Error::other)?;
    if argv.is_empty() {
        return Err(io::Error::other("empty command"));
    }
    let program = argv.remove(0);
    crate::sandbox::signals::let_children_take_interrupts();
    Ok((program, argv))
}

pub(super) fn start_pipes(spec: &JobSpec<'_>) -> io::Result<Started> {
    let (program, args) = argv(spec)?;
    let (read_end, write_end) = io::pipe()?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(spec.dir)
        .env_clear()
        .envs(spec.sandbox.env())
        .envs(
            spec.sandbox
                .process_env(spec.env)
                .iter()
                .map(|(k, v)| (k, v)),
        )
        .stdin(if spec.input {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(write_end.try_clone()?)
        .stderr(write_end)
        .process_group(0);
    let mut child = cmd.spawn()?;
    // Drop our copies of the write end, or the pipe never reaches end-of-file.
    drop(cmd);
    let input = child
        .stdin
        .take()
        .map(|stdin| Box::new(stdin) as Box<dyn Write + Send>);
    Ok(Started {
        pid: child.id(),
        reader: Box::new(read_end),
        input,
        master: None,
        waiter: Box::new(move || {
            use std::os::unix::process::ExitStatusExt;
            match child.wait() {
                Ok(status) => (
                    status.code(),
                    status.signal().map(|n| {
                        Signal::try_from(n).map_or_else(|_| n.to_string(), |s| s.to_string())
                    }),
                ),
                Err(_) => (None, None),
            }
        }),
    })
}

pub(super) fn start_pty(spec: &JobSpec<'_>, cols: u16, rows: u16) -> io::Result<Started> {
    let pair = native_pty_system()
        .openpty(PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(|e| io::Error::other(format!("cannot open a terminal: {e}")))?;
    let (program, args) = argv(spec)?;
    let mut builder = CommandBuilder::new(program);
    builder.args(args);
    builder.cwd(spec.dir);
    builder.env_clear();
    for (name, value) in spec.sandbox.env() {
        builder.env(name, value);
    }
    for (name, value) in spec.sandbox.process_env(spec.env) {
        builder.env(name, value);
    }
    let mut child = pair
        .slave
        .spawn_command(builder)
        .map_err(|e| io::Error::other(e.to_string()))?;
    // Only the child may hold the terminal's slave side, or reading never ends.
    drop(pair.slave);
    let pid = child.process_id().unwrap_or(0);
    let fail = |e: &dyn std::fmt::Display| {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        io::Error::other(format!("cannot use the terminal: {e}"))
    };
    let reader = pair.master.try_clone_reader().map_err(|e| fail(&e))?;
    let input = if spec.input {
        Some(pair.master.take_writer().map_err(|e| fail(&e))?)
    } else {
        None
    };
    Ok(Started {
        pid,
        reader,
        input,
        master: Some(pair.master),
        waiter: Box::new(move || match child.wait() {
            Ok(status) => match status.signal() {
                None => (i32::try_from(status.exit_code()).ok(), None),
                Some(signal) => (None, Some(signal.to_string())),
            },
            Err(_) => (None, None),
        }),
    })
}

/// Reads until end-of-file (pipes) or EIO (a PTY whose every slave holder closed it).
pub(super) fn read_output<S: Sink>(
    mut reader: Box<dyn Read + Send>,
    mut filter: Option<AnsiFilter>,
    sink: &Mutex<S>,
    progress: &watch::Sender<Progress>,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    let mut text = Vec::new();
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let data = match filter.as_mut() {
            Some(filter) => {
                text.clear();
                filter.feed(&chunk[..n], &mut text);
                &text[..]
            }
            None => &chunk[..n],
        };
        if data.is_empty() {
            continue;
        }
        sink.lock().unwrap_or_else(|e| e.into_inner()).push(data);
        progress.send_modify(|p| p.bytes += data.len() as u64);
    }
    progress.send_modify(|p| p.closed = true);
}
