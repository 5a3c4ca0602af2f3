//! The task behind one lane: its queue, its active run and its mailbox.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::queue::{PushOutcome, QueuedTurn, TurnQueue};
use super::{Hold, LaneJob, LaneMsg, LaneSettings, LaneStatus, Shared, StopReport};
use crate::agent::run::{RunOutcome, Steer};
use crate::config::QueueMode;

/// Steered messages one run can hold before the rest become followups.
const STEER_BUFFER: usize = 16;
/// A lane with nothing to do for this long ends its task (it is restarted on the next
/// message, with its settings read back from the store), so idle sessions cost no memory.
/// Short: a lane holds nothing between turns that a restart (a task, a mailbox and one
/// store read) would not rebuild, while thousands of live lanes hold about 2.4 KB each.
pub(super) const IDLE_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

struct Active {
    /// The durable pending seqs of the work running (none for a job).
    seqs: Vec<u64>,
    cancel: CancellationToken,
    steer: mpsc::Sender<Box<Steer>>,
    /// Turns handed to the run as steers, to requeue any it could not take.
    steered: Vec<QueuedTurn>,
    stop_waiters: Vec<(oneshot::Sender<StopReport>, usize)>,
}

struct Lane {
    key: String,
    settings: LaneSettings,
    queue: TurnQueue,
    active: Option<Active>,
    collect_at: Option<Instant>,
    idle_waiters: Vec<oneshot::Sender<()>>,
    /// Transcript writes waiting for the active run to end.
    writes: Vec<super::TranscriptWrite>,
    /// Jobs waiting for the active run to end; they go before queued turns.
    jobs: VecDeque<LaneJob>,
    shared: Arc<Shared>,
}

/// Runs one lane until its mailbox closes or the gateway shuts down.
pub(super) async fn lane(
    key: String,
    defaults: LaneSettings,
    mut rx: mpsc::Receiver<LaneMsg>,
    shared: Arc<Shared>,
) {
    let settings = super::stored_settings(&shared.store, &key, defaults);
    let mut lane = Lane {
        key,
        settings,
        queue: TurnQueue::default(),
        active: None,
        collect_at: None,
        idle_waiters: Vec::new(),
        writes: Vec::new(),
        jobs: VecDeque::new(),
        shared,
    };
    let shutdown = lane.shared.shutdown.clone();
    let mut mark = RunMark {
        shared: lane.shared.clone(),
        key: lane.key.clone(),
        marked: false,
    };
    let mut running: Option<JoinHandle<RunOutcome>> = None;
    loop {
        if running.is_none() {
            // Between runs: the transcript is the lane's to write.
            for write in lane.writes.drain(..) {
                write();
            }
            running = lane.start_if_ready();
        }
        lane.notify_idle();
        mark.set(lane.active.is_some());
        let deadline = lane.collect_at.filter(|_| running.is_none());
        let idle = running.is_none()
            && lane.queue.is_empty()
            && lane.jobs.is_empty()
            && lane.idle_waiters.is_empty();
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => {
                if let Some(active) = lane.active.take() {
                    active.cancel.cancel();
                }
                if let Some(handle) = running.take() {
                    let _ = handle.await;
                }
                lane.writes.drain(..).for_each(|write| write());
                return;
            }
            msg = rx.recv() => match msg {
                Some(msg) => lane.handle(msg),
                None => {
                    if let Some(handle) = running.take() {
                        let _ = handle.await;
                    }
                    lane.writes.drain(..).for_each(|write| write());
                    return;
                }
            },
            outcome = wait_run(&mut running), if running.is_some() => {
                running = None;
                lane.finished(outcome);
            }
            _ = sleep_until_opt(deadline), if deadline.is_some() => {
                lane.collect_at = None;
            }
            _ = tokio::time::sleep(IDLE_EXIT), if idle && deadline.is_none() => {
                if lane.retire(&mut rx) {
                    return;
                }
            }
        }
    }
}

/// Keeps this lane's key in [`super::Shared::running`] while it has a run going on (and
/// takes it out when the lane ends, however it ends).
struct RunMark {
    shared: Arc<Shared>,
    key: String,
    marked: bool,
}

impl RunMark {
    /// Notes whether a run goes on now (the set is touched only on a change).
    fn set(&mut self, running: bool) {
        if running == self.marked {
            return;
        }
        if let Ok(mut set) = self.shared.running.lock() {
            match running {
                true => set.insert(self.key.clone()),
                false => set.remove(&self.key),
            };
            self.marked = running;
        }
    }
}

impl Drop for RunMark {
    fn drop(&mut self) {
        self.set(false);
    }
}

async fn wait_run(running: &mut Option<JoinHandle<RunOutcome>>) -> Option<RunOutcome> {
    match running.as_mut() {
        Some(handle) => match handle.await {
            Ok(outcome) => Some(outcome),
            Err(e) => {
                tracing::error!(error = %e, "a run task failed");
                None
            }
        },
        None => std::future::pending().await,
    }
}

impl Lane {
    fn handle(&mut self, msg: LaneMsg) {
        match msg {
            LaneMsg::Turn(turn) => self.arrive(*turn),
            LaneMsg::Write(write) => self.writes.push(write),
            LaneMsg::Job(job) => self.jobs.push_back(job),
            LaneMsg::Stop(reply) => self.stop(reply),
            LaneMsg::Status(reply) => {
                let _ = reply.send(LaneStatus {
                    settings: self.settings,
                    queued: self.queue.len(),
                    running: self.active.is_some(),
                });
            }
            LaneMsg::Settings(settings) => self.settings = *settings,
            LaneMsg::WaitIdle(reply) => self.idle_waiters.push(reply),
        }
    }

    fn arrive(&mut self, turn: QueuedTurn) {
        if self.holds(&turn.seqs) {
            // Handed over again (on a cluster, a partition this node lost for a moment and
            // took back): it is queued or running here already, and runs once.
            tracing::debug!(session = %self.key, seqs = ?turn.seqs, "turn already in its lane");
            return;
        }
        if self.settings.mode == QueueMode::Collect {
            self.collect_at = Some(crate::domain::deadline::after(self.settings.debounce));
        }
        let Some(active) = &mut self.active else {
            self.enqueue(turn);
            return;
        };
        match self.settings.mode {
            // A scheduled turn waits for the running one (its answer is its own).
            _ if turn.scheduled => self.enqueue(turn),
            // Older messages wait in the queue (the steer mailbox was full, or they came in
            // a burst): a newer one goes behind them rather than into the run ahead of them.
            QueueMode::Steer if self.queue.has_waiting_messages() => self.enqueue(turn),
            QueueMode::Steer => {
                let steer = Steer {
                    seqs: turn.seqs.clone(),
                    text: turn.text.clone(),
                    files: turn.files.clone(),
                };
                if active.steer.try_send(Box::new(steer)).is_ok() {
                    active.steered.push(turn);
                } else {
                    self.enqueue(turn);
                }
            }
            QueueMode::Interrupt => {
                active.cancel.cancel();
                self.queue.push_front(turn);
            }
            QueueMode::Followup | QueueMode::Collect => self.enqueue(turn),
        }
    }

    /// Whether a message of `seqs` is queued here, running, or steered into the run.
    fn holds(&self, seqs: &[u64]) -> bool {
        let active = self.active.as_ref().map(|a| {
            let steered = a.steered.iter().flat_map(|t| t.seqs.iter());
            a.seqs.iter().chain(steered).copied().collect::<Vec<u64>>()
        });
        let active = active.unwrap_or_default();
        seqs.iter()
            .any(|seq| active.contains(seq) || self.queue.holds(*seq))
    }

    fn enqueue(&mut self, turn: QueuedTurn) {
        match self.queue.push(turn, self.settings.cap, self.settings.drop) {
            PushOutcome::Queued => {}
            PushOutcome::DroppedOldest(dropped) => {
                tracing::warn!(session = %self.key, "queue full: dropped the oldest turn");
                self.forget(&dropped.seqs);
            }
            PushOutcome::Rejected(rejected) => {
                tracing::warn!(session = %self.key, "queue full: rejected an incoming turn");
                self.forget(&rejected.seqs);
                self.shared.runner.notice(
                    &rejected.target,
                    format!(
                        "Queue full ({} pending): your message was not queued.",
                        self.settings.cap
                    ),
                );
            }
        }
    }

    fn stop(&mut self, reply: oneshot::Sender<StopReport>) {
        // Jobs not started yet are dropped: their callers learn it was stopped.
        self.jobs.clear();
        let seqs = self.queue.clear();
        let cleared = seqs.len();
        self.forget(&seqs);
        self.collect_at = None;
        match &mut self.active {
            Some(active) => {
                active.cancel.cancel();
                active.stop_waiters.push((reply, cleared));
            }
            None => {
                let _ = reply.send(StopReport {
                    cleared,
                    stopped_run: false,
                });
            }
        }
    }

    fn start_if_ready(&mut self) -> Option<JoinHandle<RunOutcome>> {
        let draining = self.shared.draining.load(Ordering::SeqCst);
        if self.active.is_some() || self.shared.shutdown.is_cancelled() || draining {
            return None;
        }
        if let Some(job) = self.jobs.pop_front() {
            return Some(self.start_job(job));
        }
        let next = if self.settings.mode == QueueMode::Collect {
            if self.collect_at.is_some_and(|at| at > Instant::now()) {
                return None;
            }
            self.queue.pop_collected()
        } else {
            self.queue.pop_next()
        };
        let turn = next?;
        if let Some(seqs) = self.out_of_order(&turn) {
            self.shared.runner.give_back(&self.key, &seqs);
            return None;
        }
        let run_seqs = turn.seqs.clone();
        let cancel = self.shared.shutdown.child_token();
        let (steer_tx, steer_rx) = mpsc::channel(STEER_BUFFER);
        let runner = self.shared.runner.clone();
        let limit = self.shared.limit.clone();
        let key = self.key.clone();
        let run_cancel = cancel.clone();
        let store = self.shared.store.clone();
        let shutdown = self.shared.shutdown.clone();
        let shared = self.shared.clone();
        let handle = tokio::spawn(async move {
            // Waiting for a slot under the global limit is a cancellation point too. /stop
            // drops the turn; a shutdown keeps it pending, to run at the next start.
            let permit = match limit.clone().try_acquire_owned() {
                Ok(permit) => Some(Ok(permit)),
                // Whoever waits for a slot sees the typing indicator meanwhile.
                Err(_) => tokio::select! {
                    permit = limit.acquire_owned() => Some(permit),
                    never = runner.waiting(&turn) => match never {},
                    () = run_cancel.cancelled() => None,
                },
            };
            let Some(permit) = permit else {
                if !shutdown.is_cancelled() {
                    for seq in &turn.seqs {
                        if let Err(e) = store.remove_pending(*seq) {
                            tracing::error!(error = %e, "cannot remove a stopped turn");
                        }
                    }
                    runner.dropped(&key, &turn.seqs);
                }
                return never_ran(steer_rx);
            };
            let _permit = permit;
            if shared.draining.load(Ordering::SeqCst) {
                // The gateway is stopping: the turn stays pending for the next start.
                return never_ran(steer_rx);
            }
            runner.run(key, turn, run_cancel, steer_rx).await
        });
        self.active = Some(Active {
            seqs: run_seqs,
            cancel,
            steer: steer_tx,
            steered: Vec::new(),
            stop_waiters: Vec::new(),
        });
        Some(handle)
    }

    /// When `turn` may not start here now ([`super::Runner::hold`]): the seqs to give back,
    /// so that all are handed out again in order: the older ones waiting outside this lane,
    /// `turn`'s and every queued turn's. In interrupt mode the newest message runs first by
    /// design, so older ones queued here do not hold it back; in the other modes any older one
    /// does (the queue would run out of order).
    fn out_of_order(&mut self, turn: &QueuedTurn) -> Option<Vec<u64>> {
        let mut seqs = match self.shared.runner.hold(&self.key, turn) {
            Hold::Go => return None,
            Hold::NotHere => Vec::new(),
            Hold::Older(older) if self.settings.mode == QueueMode::Interrupt => {
                let outside: Vec<u64> = older
                    .into_iter()
                    .filter(|seq| !self.queue.holds(*seq))
                    .collect();
                if outside.is_empty() {
                    return None;
                }
                outside
            }
            Hold::Older(older) if older.is_empty() => return None,
            Hold::Older(older) => older,
        };
        tracing::info!(
            session = %self.key,
            seqs = ?turn.seqs,
            older = ?seqs,
            "cluster: the turn may not start here now (an older message waits, or the session is not held); its turns are handed out again in order"
        );
        seqs.extend(&turn.seqs);
        seqs.extend(self.queue.clear());
        self.collect_at = None;
        Some(seqs)
    }

    /// Starts `job` in the run's place: it waits for a slot under the global limit, and
    /// `/stop` cancels it. Steers cannot reach it (its steer mailbox is closed), so turns
    /// arriving meanwhile queue.
    fn start_job(&mut self, job: LaneJob) -> JoinHandle<RunOutcome> {
        let cancel = self.shared.shutdown.child_token();
        let (steer_tx, _) = mpsc::channel(1);
        let limit = self.shared.limit.clone();
        let job_cancel = cancel.clone();
        let handle = tokio::spawn(async move {
            let permit = tokio::select! {
                permit = limit.acquire_owned() => permit,
                _ = job_cancel.cancelled() => return nothing_ran(),
            };
            let _permit = permit;
            job(job_cancel).await;
            nothing_ran()
        });
        self.active = Some(Active {
            seqs: Vec::new(),
            cancel,
            steer: steer_tx,
            steered: Vec::new(),
            stop_waiters: Vec::new(),
        });
        handle
    }

    fn finished(&mut self, outcome: Option<RunOutcome>) {
        let Some(mut active) = self.active.take() else {
            return;
        };
        let stopped = !active.stop_waiters.is_empty();
        let leftover: Vec<u64> = outcome
            .map(|o| o.leftover.into_iter().flat_map(|s| s.seqs).collect())
            .unwrap_or_default();
        // Steers the run could not take run next, in arrival order (unless /stop cleared them).
        for turn in active.steered.drain(..).rev() {
            if !turn.seqs.iter().any(|seq| leftover.contains(seq)) {
                continue;
            }
            if stopped {
                self.forget(&turn.seqs);
            } else {
                self.queue.push_front(turn);
            }
        }
        for (waiter, cleared) in active.stop_waiters {
            let _ = waiter.send(StopReport {
                cleared,
                stopped_run: true,
            });
        }
    }

    /// Ends an idle lane if its mailbox is empty, under the lanes lock so that no sender can
    /// slip a message in between; returns whether it ended.
    fn retire(&self, rx: &mut mpsc::Receiver<LaneMsg>) -> bool {
        let Ok(mut lanes) = self.shared.lanes.lock() else {
            return false;
        };
        if !rx.is_empty() {
            return false;
        }
        rx.close();
        if lanes.get(&self.key).is_some_and(|tx| tx.is_closed()) {
            lanes.remove(&self.key);
        }
        true
    }

    fn notify_idle(&mut self) {
        if self.active.is_none() && self.queue.is_empty() {
            for waiter in self.idle_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    /// Removes durable pending entries of turns that will never run, and says so.
    fn forget(&self, seqs: &[u64]) {
        for seq in seqs {
            if let Err(e) = self.shared.store.remove_pending(*seq) {
                tracing::error!(error = %e, seq, "cannot remove a pending turn");
            }
        }
        if !seqs.is_empty() {
            self.shared.runner.dropped(&self.key, seqs);
        }
    }
}

/// The outcome of a run stopped before it got a slot: every steer it held is left over.
fn never_ran(mut steer: mpsc::Receiver<Box<Steer>>) -> RunOutcome {
    steer.close();
    let mut outcome = nothing_ran();
    while let Ok(s) = steer.try_recv() {
        outcome.leftover.push(*s);
    }
    outcome
}

/// The outcome of lane work that was no run (a job, or a run that never started).
fn nothing_ran() -> RunOutcome {
    RunOutcome {
        status: crate::agent::run::RunStatus::Aborted,
        text: String::new(),
        steered_seqs: Vec::new(),
        leftover: Vec::new(),
        usage: Default::default(),
        context_tokens: 0,
        cost_usd: None,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    if let Some(at) = deadline {
        tokio::time::sleep_until(at).await;
    }
}
