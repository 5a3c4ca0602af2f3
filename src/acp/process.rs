//! The coding agent's process: started in its own process group with piped stdio, watched
//! for exit, and ended with its whole group (SPEC 4: `/acp close` kills the process tree).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use super::AcpError;
use crate::sandbox::{ChildSandbox, GRACE, ProcessGroup};

/// A running agent process.
#[derive(Debug)]
pub struct AgentProcess {
    pid: u32,
    /// Its process group, killed when the process is dropped.
    group: ProcessGroup,
    /// `None` while running, then how it ended.
    exit: watch::Receiver<Option<Exit>>,
}

/// How an agent process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(signal) => write!(f, "signal {signal}"),
        }
    }
}

/// The pipes of a freshly started process.
#[derive(Debug)]
pub struct Pipes {
    /// The agent's stdin (our requests).
    pub stdin: ChildStdin,
    /// The agent's stdout (its messages).
    pub stdout: ChildStdout,
}

impl AgentProcess {
    /// Starts `argv` in `cwd` from the scrubbed environment plus `env` (the harness's
    /// configured variables: a model key reaches it only when configured there), in a new
    /// process group, confined as `sandbox` says. Its stderr goes to the log, line by line,
    /// under `harness`.
    pub fn spawn(
        harness: &str,
        argv: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        sandbox: &ChildSandbox,
    ) -> Result<(AgentProcess, Pipes), AcpError> {
        let program = argv.first().ok_or_else(|| AcpError::Spawn {
            harness: harness.to_owned(),
            reason: "its command is empty".to_owned(),
        })?;
        let wrapped: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
        let wrapped = sandbox.argv(&wrapped);
        let Some((start, args)) = wrapped.split_first() else {
            return Err(AcpError::Spawn {
                harness: harness.to_owned(),
                reason: "its command is empty".to_owned(),
            });
        };
        let mut child = Command::new(start)
            .args(args)
            .env_clear()
            .envs(crate::sandbox::env::scrubbed(&[]))
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| AcpError::Spawn {
                harness: harness.to_owned(),
                reason: format!("cannot start {program}: {e}"),
            })?;
        let pid = child.id().ok_or_else(|| AcpError::Spawn {
            harness: harness.to_owned(),
            reason: "it exited at once".to_owned(),
        })?;
        let (Some(stdin), Some(stdout), stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(AcpError::Spawn {
                harness: harness.to_owned(),
                reason: "its pipes are missing".to_owned(),
            });
        };
        if let Some(stderr) = stderr {
            let harness = harness.to_owned();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(harness = %harness, "agent stderr: {line}");
                }
            });
        }
        let (tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            let exit = match status {
                Ok(status) => match (
                    status.code(),
                    std::os::unix::process::ExitStatusExt::signal(&status),
                ) {
                    (Some(code), _) => Exit::Code(code),
                    (None, Some(signal)) => Exit::Signal(signal),
                    (None, None) => Exit::Code(-1),
                },
                Err(_) => Exit::Code(-1),
            };
            let _ = tx.send(Some(exit));
        });
        let group = ProcessGroup::led_by(Some(pid));
        Ok((AgentProcess { pid, group, exit }, Pipes { stdin, stdout }))
    }

    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// How it ended, if it has.
    pub fn exit_status(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    /// Waits until it has ended.
    pub async fn exited(&self) -> Exit {
        let mut exit = self.exit.clone();
        loop {
            if let Some(exit) = *exit.borrow_and_update() {
                return exit;
            }
            if exit.changed().await.is_err() {
                return Exit::Code(-1);
            }
        }
    }

    /// Waits up to `wait` for it to end by itself.
    pub async fn exited_within(&self, wait: Duration) -> Option<Exit> {
        tokio::time::timeout(wait, self.exited()).await.ok()
    }

    /// Ends the whole process group: SIGTERM, up to [`GRACE`] for the agent to exit, then
    /// SIGKILL to the group (the leader may be gone while its children live on). Grandchildren
    /// that left the group are out of reach (as with any process supervisor).
    pub async fn terminate(&self) {
        self.group
            .stop(async {
                self.exited().await;
            })
            .await;
        let _ = self.exited_within(GRACE).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_ends_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
        let (process, _pipes) = AgentProcess::spawn(
            "test",
            &argv,
            &BTreeMap::new(),
            dir.path(),
            &Default::default(),
        )
        .unwrap();
        let grandchild = loop {
            if let Ok(text) = std::fs::read_to_string(&pidfile)
                && let Ok(pid) = text.trim().parse::<i32>()
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        process.terminate().await;
        assert!(process.exit_status().is_some());
        // A zombie (killed, not yet reaped by init) counts as dead.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{grandchild}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        };
        for _ in 0..100 {
            if !alive() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!alive(), "the grandchild outlived terminate()");
    }

    use crate::config::is_chela_secret;

    #[test]
    fn chelas_secrets_are_recognised() {
        assert!(is_chela_secret("TELEGRAM_BOT_TOKEN"));
        assert!(is_chela_secret("DISCORD_BOT_TOKEN"));
        assert!(is_chela_secret("CHELA_RPC_TOKEN"));
        assert!(!is_chela_secret("OPENAI_API_KEY"));
        assert!(!is_chela_secret("PATH"));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let argv = vec!["/nonexistent/agent".to_owned()];
            let err = AgentProcess::spawn(
                "x",
                &argv,
                &BTreeMap::new(),
                Path::new("/"),
                &Default::default(),
            )
            .unwrap_err();
            assert!(
                err.to_string().contains("cannot start /nonexistent/agent"),
                "{err}"
            );
        });
    }
}
