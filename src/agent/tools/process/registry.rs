//! The background processes of one agent, shared by all its runs: bounded in number and in
//! output, finished ones forgotten after a while, all of them killed when it is dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::buffer::OutputRing;
use crate::agent::tools::job::{Clock, Job, JobSpec, system_clock};

/// How much the registry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most processes running at once; starting another is refused.
    pub max_running: usize,
    /// Most processes kept, running or finished; the longest-finished go first.
    pub max_kept: usize,
    /// How long a finished process stays readable.
    pub ttl: Duration,
    /// Most output bytes kept per process (the newest).
    pub buffer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_running: 32,
            max_kept: 64,
            ttl: Duration::from_secs(30 * 60),
            buffer_bytes: 256 * 1024,
        }
    }
}

/// One background process.
pub(crate) struct Proc {
    /// `proc-N`.
    pub(crate) id: String,
    /// The command line it runs.
    pub(crate) command: String,
    /// When it started (by the registry's clock).
    pub(crate) started: Instant,
    /// The process group and its input.
    pub(crate) job: Job,
    /// Its output, newest bytes kept.
    pub(crate) output: Arc<Mutex<OutputRing>>,
    /// Stream position up to which `poll` has handed out output.
    pub(crate) cursor: Mutex<u64>,
    /// Set when the `timeout` given to `exec` ended it.
    pub(crate) timed_out: AtomicBool,
}

impl Proc {
    /// The output buffer, locked.
    pub(crate) fn output(&self) -> MutexGuard<'_, OutputRing> {
        self.output.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True once the `timeout` given to `exec` killed it.
    pub(crate) fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }
}

/// The background processes started by `exec` with `background: true`, read and driven by
/// the `process` tool. They belong to the gateway, not to a run: stopping a run (`/stop`)
/// leaves them running; dropping the registry (gateway shutdown) kills every one.
pub struct ProcessRegistry {
    state: Mutex<State>,
    limits: Limits,
    clock: Clock,
}

#[derive(Default)]
struct State {
    next: u64,
    procs: BTreeMap<u64, Arc<Proc>>,
}

impl Default for ProcessRegistry {
    fn default() -> Self {
        ProcessRegistry::new()
    }
}

impl ProcessRegistry {
    /// An empty registry with the default [`Limits`].
    pub fn new() -> Self {
        ProcessRegistry::with_limits(Limits::default(), system_clock())
    }

    /// An empty registry with `limits`, reading time from `clock`.
    pub(crate) fn with_limits(limits: Limits, clock: Clock) -> Self {
        ProcessRegistry {
            state: Mutex::default(),
            limits: Limits {
                max_kept: limits.max_kept.max(limits.max_running + 1),
                ..limits
            },
            clock,
        }
    }

    /// The registry's limits.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Now, by the registry's clock.
    pub(crate) fn now(&self) -> Instant {
        (self.clock)()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (now, ttl) = (self.now(), self.limits.ttl);
        state.procs.retain(|_, p| {
            p.job
                .exit()
                .is_none_or(|e| now.saturating_duration_since(e.at) < ttl)
        });
        state
    }

    /// Starts `spec` as a new background process, or says why not.
    pub(crate) fn start(&self, spec: &JobSpec<'_>) -> Result<Arc<Proc>, String> {
        let mut state = self.state();
        let running = state
            .procs
            .values()
            .filter(|p| p.job.exit().is_none())
            .count();
        if running >= self.limits.max_running {
            return Err(format!(
                "too many background processes: {running} are running (at most {}); kill one \
                 with the process tool (action kill) or wait for one to end",
                self.limits.max_running
            ));
        }
        while state.procs.len() >= self.limits.max_kept {
            let oldest = state
                .procs
                .iter()
                .filter_map(|(n, p)| p.job.exit().map(|e| (e.at, *n)))
                .min();
            match oldest {
                Some((_, n)) => state.procs.remove(&n),
                None => break,
            };
        }
        let output = Arc::new(Mutex::new(OutputRing::new(self.limits.buffer_bytes)));
        let job = Job::spawn(spec, Arc::clone(&output), Arc::clone(&self.clock))
            .map_err(|e| format!("cannot start `sh -c`: {e}"))?;
        state.next += 1;
        let n = state.next;
        let proc = Arc::new(Proc {
            id: format!("proc-{n}"),
            command: spec.command.to_string(),
            started: self.now(),
            job,
            output,
            cursor: Mutex::new(0),
            timed_out: AtomicBool::new(false),
        });
        state.procs.insert(n, Arc::clone(&proc));
        Ok(proc)
    }

    /// The process `id`, or a message the model can act on.
    pub(crate) fn get(&self, id: &str) -> Result<Arc<Proc>, String> {
        let state = self.state();
        id.strip_prefix("proc-")
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|n| state.procs.get(&n))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "no process {id:?}; action list shows the known ones (finished ones are \
                     forgotten {} min after they end)",
                    self.limits.ttl.as_secs() / 60
                )
            })
    }

    /// Every process kept, oldest first.
    pub(crate) fn list(&self) -> Vec<Arc<Proc>> {
        self.state().procs.values().cloned().collect()
    }
}

impl Drop for ProcessRegistry {
    /// Gateway shutdown: every process group still running is killed, even one a call still
    /// holds.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for proc in state.procs.values() {
            proc.job.signal(Signal::SIGKILL);
        }
    }
}
