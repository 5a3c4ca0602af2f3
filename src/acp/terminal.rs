//! The client's terminal service (`terminal/*`): commands an agent runs through chela, each on
//! a real PTY (portable-pty) in its own session and process group, with bounded output.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::ErrorCode;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use tokio::sync::watch;

use crate::agent::tools::paths::{PathError, resolve_in_workspace};
use crate::sandbox::child::ChildSandboxError;
use crate::sandbox::{ChildSandbox, ProcessGroup};

/// Most terminals one connection may hold at once.
const MAX_TERMINALS: usize = 32;
/// How long an exit waits for the terminal's last output to be read.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Why a terminal request was refused or failed; the text is what the agent reads.
#[derive(Debug, thiserror::Error)]
pub enum TermError {
    /// The request names no session chela knows.
    #[error("unknown session")]
    UnknownSession,
    /// No terminal has this id (never created, or released).
    #[error("no terminal {id}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The working folder is refused (outside the session's folder…).
    #[error(transparent)]
    Cwd(#[from] PathError),
    /// The connection already holds the most terminals it may.
    #[error("too many terminals (at most {max}); release some")]
    TooMany {
        /// The most terminals one connection may hold.
        max: usize,
    },
    /// The command or its environment cannot be run in the sandbox.
    #[error(transparent)]
    Sandbox(#[from] ChildSandboxError),
    /// The command is empty.
    #[error("no command")]
    NoCommand,
    /// No PTY could be opened.
    #[error("cannot open a terminal: {0}")]
    Open(String),
    /// The command could not be started.
    #[error("cannot start {command}: {reason}")]
    Start {
        /// The command asked for.
        command: String,
        /// Why it could not start.
        reason: String,
    },
    /// The terminal's output cannot be read.
    #[error("cannot read the terminal: {0}")]
    Output(String),
    /// The terminal's exit watcher ended without reporting an exit.
    #[error("terminal {id} went away")]
    Gone {
        /// The terminal's id.
        id: String,
    },
    /// A thread panicked while holding the terminals' state.
    #[error("terminal state poisoned")]
    Poisoned,
}

impl TermError {
    /// The ACP error code answered: an unknown session or terminal is "resource not found"
    /// (`-32002`), a failure on chela's side "internal error" (`-32603`), the rest "invalid
    /// params" (`-32602`).
    pub fn code(&self) -> ErrorCode {
        match self {
            TermError::UnknownSession | TermError::NotFound { .. } => ErrorCode::RESOURCE_NOT_FOUND,
            TermError::Open(_)
            | TermError::Output(_)
            | TermError::Gone { .. }
            | TermError::Poisoned => ErrorCode::INTERNAL_ERROR,
            TermError::Cwd(_)
            | TermError::TooMany { .. }
            | TermError::Sandbox(_)
            | TermError::NoCommand
            | TermError::Start { .. } => ErrorCode::INVALID_PARAMS,
        }
    }

    fn not_found(id: &str) -> Self {
        TermError::NotFound { id: id.to_owned() }
    }
}

/// How a terminal's command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermExit {
    /// Exit code, when it exited.
    pub code: Option<u32>,
    /// Signal name, when a signal ended it.
    pub signal: Option<String>,
}

/// Output so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermOutput {
    /// The kept output (the tail, when it outgrew the limit).
    pub output: String,
    /// True when older output was dropped.
    pub truncated: bool,
    /// How it ended, if it has.
    pub exit: Option<TermExit>,
}

/// A bounded output buffer that keeps the newest bytes.
#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    truncated: bool,
    limit: usize,
}

impl Buffer {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > self.limit {
            let cut = self.bytes.len() - self.limit;
            self.bytes.drain(..cut);
            // Do not start in the middle of a UTF-8 character.
            while self.bytes.first().is_some_and(|b| (b & 0xC0) == 0x80) {
                self.bytes.remove(0);
            }
            self.truncated = true;
        }
    }
}

struct Term {
    /// The command's group; dropped while armed (the command still runs), it is killed.
    group: ProcessGroup,
    output: Arc<Mutex<Buffer>>,
    exit: watch::Receiver<Option<TermExit>>,
}

/// The terminals of one connection.
pub struct Terminals {
    terms: Mutex<HashMap<String, Term>>,
    default_limit: usize,
    sandbox: Arc<ChildSandbox>,
}

impl Terminals {
    /// No terminals yet; output is capped at `default_limit` bytes unless a request asks less.
    pub fn new(default_limit: usize) -> Self {
        Terminals {
            terms: Mutex::new(HashMap::new()),
            default_limit,
            sandbox: Default::default(),
        }
    }

    /// These terminals, starting their commands as `sandbox` says (unconfined by default).
    pub fn confined_by(mut self, sandbox: Arc<ChildSandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Starts `command args` in `cwd` (confined to `root`) on a new PTY; returns its id.
    pub fn create(
        &self,
        root: &Path,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&Path>,
        output_limit: Option<u64>,
    ) -> Result<String, TermError> {
        let cwd: PathBuf = match cwd {
            Some(dir) => resolve_in_workspace(root, &dir.to_string_lossy())?,
            None => root.to_path_buf(),
        };
        if self.terms.lock().map_or(0, |t| t.len()) >= MAX_TERMINALS {
            return Err(TermError::TooMany { max: MAX_TERMINALS });
        }
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| TermError::Open(e.to_string()))?;
        let mut argv: Vec<std::ffi::OsString> = vec![command.into()];
        argv.extend(args.iter().map(Into::into));
        // Confined, what the agent asked for is set inside the sandbox (in the argv).
        let (argv, env) = self.sandbox.argv_with_env(&argv, env)?;
        let (program, rest) = argv.split_first().ok_or(TermError::NoCommand)?;
        let mut builder = CommandBuilder::new(program);
        builder.args(rest);
        builder.cwd(&cwd);
        // The scrubbed environment, then what the agent asked for.
        builder.env_clear();
        for (name, value) in crate::sandbox::env::scrubbed(&[]) {
            builder.env(name, value);
        }
        for (name, value) in &env {
            builder.env(name, value);
        }
        let mut child = pair
            .slave
            .spawn_command(builder)
            .map_err(|e| TermError::Start {
                command: command.to_owned(),
                reason: e.to_string(),
            })?;
        drop(pair.slave);
        let mut reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| TermError::Output(e.to_string()))?;
        let limit = output_limit
            .and_then(|l| usize::try_from(l).ok())
            .map_or(self.default_limit, |l| l.min(self.default_limit));
        let output = Arc::new(Mutex::new(Buffer {
            limit,
            ..Buffer::default()
        }));
        let (exit_tx, exit) = watch::channel(None);
        // The PTY child leads its own session, so its pid is its process group id.
        let group = ProcessGroup::led_by(child.process_id());
        let sink = output.clone();
        // Blocking reads and waits: each on its own thread, as the PTY API is synchronous.
        let master = pair.master;
        let (drained_tx, drained) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _drained = drained_tx;
            let mut chunk = [0u8; 8192];
            loop {
                match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if let Ok(mut buffer) = sink.lock() {
                            buffer.push(&chunk[..n]);
                        }
                    }
                }
            }
            drop(master);
        });
        std::thread::spawn(move || {
            let exit = match child.wait() {
                Ok(status) => TermExit {
                    code: status.signal().is_none().then(|| status.exit_code()),
                    signal: status.signal().map(str::to_owned),
                },
                Err(_) => TermExit {
                    code: None,
                    signal: None,
                },
            };
            // Report the exit once the output is read to its end (the reader ends, dropping
            // its sender), so a waiter never sees an exit without the last output; a
            // background process still holding the terminal open bounds the wait.
            let _ = drained.recv_timeout(DRAIN_GRACE);
            let _ = exit_tx.send(Some(exit));
        });
        let id = format!("term-{}", uuid::Uuid::new_v4().simple());
        if let Ok(mut terms) = self.terms.lock() {
            terms.insert(
                id.clone(),
                Term {
                    group,
                    output,
                    exit,
                },
            );
        }
        Ok(id)
    }

    /// The output so far.
    pub fn output(&self, id: &str) -> Result<TermOutput, TermError> {
        let terms = self.terms.lock().map_err(|_| TermError::Poisoned)?;
        let term = terms.get(id).ok_or_else(|| TermError::not_found(id))?;
        let buffer = term.output.lock().map_err(|_| TermError::Poisoned)?;
        Ok(TermOutput {
            output: String::from_utf8_lossy(&buffer.bytes).into_owned(),
            truncated: buffer.truncated,
            exit: term.exit.borrow().clone(),
        })
    }

    /// Waits until the command has ended.
    pub async fn wait_for_exit(&self, id: &str) -> Result<TermExit, TermError> {
        let mut exit = {
            let terms = self.terms.lock().map_err(|_| TermError::Poisoned)?;
            terms
                .get(id)
                .ok_or_else(|| TermError::not_found(id))?
                .exit
                .clone()
        };
        loop {
            if let Some(done) = exit.borrow_and_update().clone() {
                return Ok(done);
            }
            if exit.changed().await.is_err() {
                return Err(TermError::Gone { id: id.to_owned() });
            }
        }
    }

    /// Kills the command's whole process group (the terminal stays readable).
    pub fn kill(&self, id: &str) -> Result<(), TermError> {
        let terms = self.terms.lock().map_err(|_| TermError::Poisoned)?;
        let term = terms.get(id).ok_or_else(|| TermError::not_found(id))?;
        term.group.kill();
        Ok(())
    }

    /// Kills the command if it still runs and forgets the terminal.
    pub fn release(&self, id: &str) -> Result<(), TermError> {
        let mut term = self
            .terms
            .lock()
            .map_err(|_| TermError::Poisoned)?
            .remove(id)
            .ok_or_else(|| TermError::not_found(id))?;
        if term.exit.borrow().is_some() {
            term.group.disarm();
        }
        // Dropped here: a command still running is killed with its group.
        drop(term);
        Ok(())
    }
}

impl Drop for Terminals {
    /// Commands still running are killed with their groups (finished ones are left alone).
    fn drop(&mut self) {
        if let Ok(mut terms) = self.terms.lock() {
            for term in terms.values_mut().filter(|t| t.exit.borrow().is_some()) {
                term.group.disarm();
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_keeps_the_newest_bytes_on_char_boundaries() {
        let mut b = Buffer {
            limit: 4,
            ..Buffer::default()
        };
        b.push(b"ab");
        assert!(!b.truncated);
        b.push("cdé".as_bytes());
        assert!(b.truncated);
        assert!(b.bytes.len() <= 4);
        assert!(String::from_utf8(b.bytes.clone()).is_ok());
    }

    #[tokio::test]
    async fn a_command_runs_on_a_pty_and_reports_its_exit() {
        let dir = tempfile::tempdir().unwrap();
        let terms = Terminals::new(1024);
        let id = terms
            .create(
                dir.path(),
                "sh",
                &["-c".into(), "test -t 1 && echo on-a-tty; exit 3".into()],
                &[],
                None,
                None,
            )
            .unwrap();
        let exit = terms.wait_for_exit(&id).await.unwrap();
        assert_eq!(exit.code, Some(3));
        // The exit is reported once the output has been read to its end.
        let out = terms.output(&id).unwrap();
        assert!(out.output.contains("on-a-tty"), "{out:?}");
        assert_eq!(out.exit, Some(exit));
        terms.release(&id).unwrap();
        let gone = terms.output(&id).unwrap_err();
        assert!(matches!(&gone, TermError::NotFound { id: gone_id } if *gone_id == id));
        assert_eq!(gone.code(), ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(gone.to_string(), format!("no terminal {id}"));
    }

    #[tokio::test]
    async fn kill_ends_a_running_command_and_cwd_is_confined() {
        let dir = tempfile::tempdir().unwrap();
        let terms = Terminals::new(1024);
        let id = terms
            .create(dir.path(), "sleep", &["300".into()], &[], None, None)
            .unwrap();
        terms.kill(&id).unwrap();
        let exit = terms.wait_for_exit(&id).await.unwrap();
        assert_eq!(exit.code, None);
        assert!(exit.signal.is_some());
        let err = terms
            .create(dir.path(), "true", &[], &[], Some(Path::new("/")), None)
            .unwrap_err();
        assert!(matches!(err, TermError::Cwd(_)), "{err:?}");
        assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
        assert!(err.to_string().contains("refused"), "{err}");
    }
}
