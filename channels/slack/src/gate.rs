//! The catch-up's gate: whether one runs (one at a time), whether a reconnect asked for
//! another pass meanwhile, and how long live events wait for it: until it is done, at most
//! until a fixed time after its start (so a slow catch-up delays live events once, by a
//! bounded time, and never each event on its own).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Whether a catch-up runs, and since when.
pub struct Gate {
    run: Mutex<Run>,
    /// `true` while no catch-up runs.
    done: watch::Sender<bool>,
}

/// What the gate knows of the running catch-up.
#[derive(Default)]
struct Run {
    running: bool,
    /// A reconnect asked for another pass while one ran.
    again: bool,
    /// When the running pass started.
    started: Option<Instant>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            run: Mutex::new(Run::default()),
            done: watch::Sender::new(true),
        }
    }
}

impl Gate {
    /// Starts a catch-up unless one runs: `false` when one does, which then makes another
    /// pass once it is done (what a reconnect missed may be behind where it read).
    pub fn begin(&self) -> bool {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        if run.running {
            run.again = true;
            return false;
        }
        *run = Run {
            running: true,
            again: false,
            started: Some(Instant::now()),
        };
        self.done.send_replace(false);
        true
    }

    /// After a pass: `true` when another was asked for meanwhile (it starts now, and live
    /// events wait for it as for a new one); else the catch-up ends.
    pub fn pass_done(&self) -> bool {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        if run.running && run.again {
            run.again = false;
            run.started = Some(Instant::now());
            return true;
        }
        *run = Run::default();
        self.done.send_replace(true);
        false
    }

    /// Ends the catch-up: live events go on.
    pub fn end(&self) {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        *run = Run::default();
        self.done.send_replace(true);
    }

    /// Whether a catch-up runs.
    pub fn running(&self) -> bool {
        self.run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .running
    }

    /// Waits until no catch-up runs, at most until `hold` after the running pass started.
    pub async fn wait(&self, hold: Duration) {
        let mut done = self.done.subscribe();
        let deadline = {
            let run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
            match (run.running, run.started) {
                (true, Some(started)) => started + hold,
                _ => return,
            }
        };
        let _ = tokio::time::timeout_at(deadline, done.wait_for(|done| *done)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const HOLD: Duration = Duration::from_secs(2);

    #[tokio::test(start_paused = true)]
    async fn live_events_wait_until_a_deadline_counted_from_the_catch_ups_start() {
        let gate = Gate::default();
        let started = Instant::now();
        gate.wait(HOLD).await;
        assert_eq!(started.elapsed(), Duration::ZERO, "none runs: no wait");
        assert!(gate.begin());
        tokio::time::advance(Duration::from_millis(1_500)).await;
        gate.wait(HOLD).await;
        assert_eq!(started.elapsed(), HOLD, "until the deadline, not HOLD more");
        gate.wait(HOLD).await;
        assert_eq!(started.elapsed(), HOLD, "later events do not wait at all");
        assert!(gate.running(), "it still runs");
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_catch_up_lets_waiting_events_go() {
        let gate = Arc::new(Gate::default());
        assert!(gate.begin());
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.wait(Duration::from_secs(600)).await })
        };
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        gate.end();
        waiter.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconnect_during_a_catch_up_makes_it_run_again() {
        let gate = Gate::default();
        assert!(gate.begin());
        assert!(!gate.begin(), "one at a time");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(gate.pass_done(), "asked again: another pass");
        let again = Instant::now();
        gate.wait(HOLD).await;
        assert_eq!(
            again.elapsed(),
            HOLD,
            "the new pass holds live events again"
        );
        assert!(!gate.pass_done(), "nothing asked since: done");
        assert!(!gate.running());
        assert!(gate.begin(), "the next one may start");
        gate.end();
        assert!(!gate.running());
    }
}
