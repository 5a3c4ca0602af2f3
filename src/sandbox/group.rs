//! One process-group handle for every child chela starts (exec, background jobs, hooks, ACP
//! agents and their terminals): the child leads its own group, and stopping it means SIGTERM
//! to the whole group, [`GRACE`] to settle, then SIGKILL to whatever is left.

use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long a group gets between SIGTERM and SIGKILL, everywhere.
pub const GRACE: Duration = Duration::from_secs(1);

/// The process group a child leads. Dropped while armed, it kills the whole group.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Option<Pid>,
    armed: bool,
}

impl ProcessGroup {
    /// The group led by process `pid` (spawned with `process_group(0)` or `setsid`); `None`
    /// (the child is already gone) gives a handle that does nothing.
    pub fn led_by(pid: Option<u32>) -> ProcessGroup {
        ProcessGroup {
            // Never 0: killpg(0) would signal chela's own group.
            pgid: pid
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| *p > 0)
                .map(Pid::from_raw),
            armed: true,
        }
    }

    /// The group id (the leader's pid).
    pub fn id(&self) -> Option<u32> {
        self.pgid.and_then(|p| u32::try_from(p.as_raw()).ok())
    }

    /// Sends `signal` to every member.
    pub fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already gone) is the expected outcome once all exited.
            let _ = killpg(pgid, signal);
        }
    }

    /// SIGKILL to every member, at once.
    pub fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// SIGTERM, up to [`GRACE`] for `settled` (the leader exited, the output closed...),
    /// then SIGKILL to whatever is left (also members that ignored SIGTERM).
    pub async fn stop(&self, settled: impl Future<Output = ()>) {
        self.signal(Signal::SIGTERM);
        let _ = tokio::time::timeout(GRACE, settled).await;
        self.kill();
    }

    /// Leaves the group alone when dropped (it ended on its own; its id may be reused).
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_kills_a_member_that_ignores_sigterm() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "trap '' TERM; sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let group = ProcessGroup::led_by(child.id());
        group.stop(async {}).await;
        let status = tokio::time::timeout(GRACE * 5, child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success());
    }
}
