//! Helpers for tests with real processes: is a pid gone, a FIFO handshake, a movable clock.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::agent::tools::job::Clock;

/// True when `pid` no longer runs. A zombie counts as gone: it is dead, and some init
/// processes (as in this sandbox) never reap orphans.
pub(crate) fn is_gone(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_err()
        || std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
}

/// True once `pid` is gone, checked until `deadline` (exit is asynchronous).
pub(crate) async fn gone_by(pid: i32, deadline: Instant) -> bool {
    loop {
        if is_gone(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The pid a test command wrote to `dir/pid` (`sleep 30 & echo $! > pid`).
pub(crate) fn read_pid(dir: &Path) -> i32 {
    std::fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Makes a FIFO at `path`.
pub(crate) fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// Reads the FIFO at `path`: returns once a command opened it, wrote and closed it.
pub(crate) async fn read_fifo(path: &Path) -> String {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
        .await
        .unwrap()
        .unwrap()
}

/// A clock that moves only when told.
#[derive(Clone)]
pub(crate) struct ManualClock {
    base: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// Starts at the real now.
    pub(crate) fn new() -> Self {
        ManualClock {
            base: Instant::now(),
            offset: Arc::default(),
        }
    }

    /// Moves time forward by `by`.
    pub(crate) fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }

    /// The clock as the registry takes it.
    pub(crate) fn clock(&self) -> Clock {
        let me = self.clone();
        Arc::new(move || me.base + *me.offset.lock().unwrap())
    }
}
