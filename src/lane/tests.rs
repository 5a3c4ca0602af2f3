//! Lane tests: queue modes, caps, `/stop`, idle waits, the global limit, settings and shutdown,
//! driven by a fake [`Runner`] the test releases run by run.
//!
//! Every test runs on a paused clock: `settle` is a virtual sleep, which returns only once
//! every other task has nothing left to do, so "nothing happened" checks are deterministic.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::queue::{COLLECT_HEADER, OVERFLOW_HEADER};
use super::*;
use crate::agent::run::RunStatus;
use crate::store::PendingTurn;

/// What the fake runner and the test saw, in order.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Started(String),
    Took(String),
    Returned(String, RunStatus),
    Notice(String),
    StopAnswered,
}

/// One run the fake runner started; dropping it (or `finish`) lets the run return.
struct RunHandle {
    key: String,
    text: String,
    seqs: Vec<u64>,
    finish: oneshot::Sender<usize>,
}

impl RunHandle {
    /// Lets the run return `Ok`, consuming up to `take_steers` steered messages first; the
    /// rest come back as `leftover`.
    fn finish(self, take_steers: usize) {
        let _ = self.finish.send(take_steers);
    }
}

struct FakeRunner {
    log: Arc<Mutex<Vec<Ev>>>,
    started: mpsc::UnboundedSender<RunHandle>,
}

impl Runner for FakeRunner {
    fn run(
        &self,
        key: String,
        turn: QueuedTurn,
        cancel: CancellationToken,
        mut steer: mpsc::Receiver<Steer>,
    ) -> BoxFuture<'static, RunOutcome> {
        let log = self.log.clone();
        log.lock().unwrap().push(Ev::Started(turn.text.clone()));
        let (finish, finished) = oneshot::channel();
        let _ = self.started.send(RunHandle {
            key,
            text: turn.text.clone(),
            seqs: turn.seqs.clone(),
            finish,
        });
        Box::pin(async move {
            let (status, take) = tokio::select! {
                _ = cancel.cancelled() => {
                    // A run takes a moment to settle after a cancel.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    (RunStatus::Aborted, 0)
                }
                take = finished => (RunStatus::Ok, take.unwrap_or(0)),
            };
            let mut steered_seqs = Vec::new();
            for _ in 0..take {
                let Ok(s) = steer.try_recv() else { break };
                log.lock().unwrap().push(Ev::Took(s.text));
                steered_seqs.extend(s.seqs);
            }
            steer.close();
            let mut leftover = Vec::new();
            while let Ok(s) = steer.try_recv() {
                leftover.push(s);
            }
            log.lock()
                .unwrap()
                .push(Ev::Returned(turn.text.clone(), status.clone()));
            RunOutcome {
                status,
                text: String::new(),
                steered_seqs,
                leftover,
                usage: Default::default(),
            }
        })
    }

    fn notice(&self, to: &chela_channel::Conversation, text: String) {
        assert_eq!(to.chat_id, "me");
        self.log.lock().unwrap().push(Ev::Notice(text));
    }
}

struct Harness {
    lanes: Lanes,
    store: Store,
    log: Arc<Mutex<Vec<Ev>>>,
    runs: mpsc::UnboundedReceiver<RunHandle>,
}

fn settings(mode: QueueMode) -> LaneSettings {
    LaneSettings {
        mode,
        debounce: Duration::from_millis(500),
        cap: 20,
        drop: DropPolicy::Summarize,
    }
}

fn conversation() -> chela_channel::Conversation {
    chela_channel::Conversation {
        channel: "terminal".into(),
        account: "default".into(),
        kind: chela_channel::ChatKind::Direct,
        chat_id: "me".into(),
        thread_id: None,
    }
}

/// A turn with pending seq `seq` in context `context`.
fn turn_in(seq: u64, text: &str, context: &str) -> QueuedTurn {
    QueuedTurn {
        seqs: vec![seq],
        text: text.into(),
        sender: "ann".into(),
        context: context.into(),
        target: conversation(),
    }
}

fn turn(seq: u64, text: &str) -> QueuedTurn {
    turn_in(seq, text, "c")
}

/// Lets every task run until it waits, then moves the paused clock by `ms`.
async fn settle_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

async fn settle() {
    settle_ms(1).await;
}

impl Harness {
    fn new(defaults: LaneSettings, max_runs: usize) -> Self {
        Self::over(Store::temporary().unwrap(), defaults, max_runs)
    }

    fn over(store: Store, defaults: LaneSettings, max_runs: usize) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (started, runs) = mpsc::unbounded_channel();
        let runner = Arc::new(FakeRunner {
            log: log.clone(),
            started,
        });
        Harness {
            lanes: Lanes::new(runner, store.clone(), defaults, max_runs),
            store,
            log,
            runs,
        }
    }

    /// A turn for `key` backed by a durable pending entry (create these before submitting:
    /// the store's flush may let the paused clock move).
    async fn durable(&self, key: &str, text: &str) -> QueuedTurn {
        let inbound = chela_channel::Inbound {
            conversation: conversation(),
            sender: Default::default(),
            message_id: text.into(),
            text: text.into(),
            reply_to: None,
            mentioned: false,
            timestamp_ms: 0,
        };
        let pending = PendingTurn {
            session_key: key.into(),
            inbound,
            queued_ms: 0,
        };
        let seq = self.store.enqueue(&pending).await.unwrap();
        turn(seq, text)
    }

    fn pending_seqs(&self, key: &str) -> Vec<u64> {
        let pending = self.store.pending_for(key).unwrap();
        pending.into_iter().map(|(seq, _)| seq).collect()
    }

    async fn submit(&self, key: &str, turn: QueuedTurn) {
        self.lanes.submit(key, turn).await.unwrap();
    }

    /// The next run to start (fails if none starts within a minute of virtual time).
    async fn next_run(&mut self) -> RunHandle {
        tokio::time::timeout(Duration::from_secs(60), self.runs.recv())
            .await
            .expect("a run should start")
            .unwrap()
    }

    /// Asserts that no run started since the last `next_run`.
    async fn assert_no_new_run(&mut self) {
        settle().await;
        if let Ok(run) = self.runs.try_recv() {
            panic!("unexpected run of {:?}", run.text);
        }
    }

    fn log(&self) -> Vec<Ev> {
        self.log.lock().unwrap().clone()
    }

    fn started(&self) -> Vec<String> {
        let log = self.log();
        log.into_iter()
            .filter_map(|e| match e {
                Ev::Started(t) => Some(t),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn followup_runs_one_turn_at_a_time_in_fifo_order() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    for (i, text) in ["a", "b", "c"].into_iter().enumerate() {
        h.submit("k", turn(i as u64, text)).await;
    }
    let a = h.next_run().await;
    assert_eq!((a.key.as_str(), a.text.as_str(), a.seqs.clone()), ("k", "a", vec![0]));
    h.assert_no_new_run().await;
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (2, true));
    a.finish(0);
    let b = h.next_run().await;
    assert_eq!(b.text, "b");
    h.assert_no_new_run().await;
    b.finish(0);
    h.next_run().await.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn steer_during_a_run_is_injected_not_queued() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", turn(1, "a")).await;
    let a = h.next_run().await;
    h.submit("k", turn(2, "b")).await;
    settle().await;
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (0, true));
    h.assert_no_new_run().await;
    a.finish(1);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(
        h.log(),
        [
            Ev::Started("a".into()),
            Ev::Took("b".into()),
            Ev::Returned("a".into(), RunStatus::Ok),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn steers_the_run_left_unconsumed_run_next_as_followups_in_order() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", turn(1, "a")).await;
    let a = h.next_run().await;
    for (seq, text) in [(2, "b"), (3, "c"), (4, "d")] {
        h.submit("k", turn(seq, text)).await;
    }
    settle().await;
    a.finish(1);
    let c = h.next_run().await;
    assert_eq!((c.text.as_str(), c.seqs.clone()), ("c", vec![3]));
    c.finish(0);
    let d = h.next_run().await;
    assert_eq!((d.text.as_str(), d.seqs.clone()), ("d", vec![4]));
    d.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "c", "d"]);
}

#[tokio::test(start_paused = true)]
async fn collect_waits_for_the_quiet_window_then_runs_one_merged_turn() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    h.submit("k", turn_in(1, "one", "c")).await;
    settle_ms(300).await;
    h.submit("k", turn_in(2, "two", "c")).await;
    // 450 ms after the last message: still inside the window.
    settle_ms(450).await;
    h.assert_no_new_run().await;
    settle_ms(100).await;
    let run = h.next_run().await;
    assert!(run.text.starts_with(COLLECT_HEADER), "{}", run.text);
    assert!(run.text.contains("Queued #1 (ann):\none"), "{}", run.text);
    assert!(run.text.contains("Queued #2 (ann):\ntwo"), "{}", run.text);
    assert_eq!(run.seqs, vec![1, 2]);
    run.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn collect_merges_turns_queued_during_a_run_after_the_window() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    h.submit("k", turn(1, "first")).await;
    let first = h.next_run().await;
    assert_eq!(first.text, "first");
    for (seq, text) in [(2, "x"), (3, "y"), (4, "z")] {
        h.submit("k", turn(seq, text)).await;
    }
    settle_ms(1000).await;
    h.assert_no_new_run().await;
    first.finish(0);
    let batch = h.next_run().await;
    assert!(batch.text.starts_with(COLLECT_HEADER), "{}", batch.text);
    assert_eq!(batch.seqs, vec![2, 3, 4]);
    batch.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn collect_never_merges_different_contexts() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    h.submit("k", turn_in(1, "a", "x")).await;
    h.submit("k", turn_in(2, "b", "y")).await;
    h.submit("k", turn_in(3, "c", "y")).await;
    h.submit("k", turn_in(4, "d", "x")).await;
    settle_ms(600).await;
    let a = h.next_run().await;
    assert_eq!((a.text.as_str(), a.seqs.clone()), ("a", vec![1]));
    a.finish(0);
    let bc = h.next_run().await;
    assert!(bc.text.starts_with(COLLECT_HEADER), "{}", bc.text);
    assert_eq!(bc.seqs, vec![2, 3]);
    bc.finish(0);
    let d = h.next_run().await;
    assert_eq!((d.text.as_str(), d.seqs.clone()), ("d", vec![4]));
    d.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn interrupt_cancels_the_active_run_and_runs_the_newest_next() {
    let mut h = Harness::new(settings(QueueMode::Interrupt), 8);
    h.submit("k", turn(1, "a")).await;
    let _a = h.next_run().await;
    h.submit("k", turn(2, "b")).await;
    h.submit("k", turn(3, "c")).await;
    let next = h.next_run().await;
    assert_eq!(next.text, "c");
    let log = h.log();
    assert_eq!(log[1], Ev::Returned("a".into(), RunStatus::Aborted));
    next.finish(0);
}

#[tokio::test(start_paused = true)]
async fn drop_new_rejects_the_incoming_turn_and_tells_the_sender() {
    let mut h = Harness::new(
        LaneSettings {
            cap: 2,
            drop: DropPolicy::New,
            ..settings(QueueMode::Followup)
        },
        8,
    );
    let mut turns = Vec::new();
    for text in ["a", "b", "c", "d"] {
        turns.push(h.durable("k", text).await);
    }
    let rejected = turns[3].seqs[0];
    for t in turns {
        h.submit("k", t).await;
    }
    let a = h.next_run().await;
    settle().await;
    assert!(
        h.log()
            .iter()
            .any(|e| matches!(e, Ev::Notice(t) if t.contains("Queue full"))),
        "{:?}",
        h.log()
    );
    assert!(!h.pending_seqs("k").contains(&rejected));
    a.finish(0);
    h.next_run().await.finish(0);
    h.next_run().await.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn drop_old_discards_the_oldest_queued_turn() {
    let mut h = Harness::new(
        LaneSettings {
            cap: 2,
            drop: DropPolicy::Old,
            ..settings(QueueMode::Followup)
        },
        8,
    );
    let mut turns = Vec::new();
    for text in ["a", "b", "c", "d"] {
        turns.push(h.durable("k", text).await);
    }
    let dropped = turns[1].seqs[0];
    for t in turns {
        h.submit("k", t).await;
    }
    let a = h.next_run().await;
    settle().await;
    assert!(!h.pending_seqs("k").contains(&dropped));
    a.finish(0);
    h.next_run().await.finish(0);
    h.next_run().await.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "c", "d"]);
    assert!(!h.log().iter().any(|e| matches!(e, Ev::Notice(_))));
}

#[tokio::test(start_paused = true)]
async fn drop_summarize_runs_a_queue_overflow_turn_first() {
    let mut h = Harness::new(
        LaneSettings {
            cap: 2,
            ..settings(QueueMode::Followup)
        },
        8,
    );
    for (seq, text) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
        h.submit("k", turn(seq, text)).await;
    }
    h.next_run().await.finish(0);
    let summary = h.next_run().await;
    assert!(summary.text.starts_with(OVERFLOW_HEADER), "{}", summary.text);
    assert!(summary.text.contains("- ann: b"), "{}", summary.text);
    assert_eq!(summary.seqs, vec![2]);
    summary.finish(0);
    h.next_run().await.finish(0);
    h.next_run().await.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started()[2..], ["c", "d"]);
}

#[tokio::test(start_paused = true)]
async fn stop_clears_the_queue_and_answers_after_the_run_returned() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    let mut turns = Vec::new();
    for text in ["a", "b", "c"] {
        turns.push(h.durable("k", text).await);
    }
    for t in turns {
        h.submit("k", t).await;
    }
    let _a = h.next_run().await;
    let report = h.lanes.stop("k").await.unwrap();
    h.log.lock().unwrap().push(Ev::StopAnswered);
    assert_eq!(
        report,
        StopReport {
            cleared: 2,
            stopped_run: true
        }
    );
    assert_eq!(
        h.log(),
        [
            Ev::Started("a".into()),
            Ev::Returned("a".into(), RunStatus::Aborted),
            Ev::StopAnswered,
        ]
    );
    h.lanes.wait_idle("k").await.unwrap();
    h.assert_no_new_run().await;
    // The cleared turns' durable entries are gone (the runner owns the active one's).
    assert_eq!(h.pending_seqs("k").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn stop_when_idle_reports_no_run_stopped() {
    let h = Harness::new(settings(QueueMode::Followup), 8);
    let report = h.lanes.stop("k").await.unwrap();
    assert_eq!(report, StopReport::default());
}

#[tokio::test(start_paused = true)]
async fn stop_during_the_collect_window_clears_without_a_run() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    h.submit("k", turn(1, "a")).await;
    let report = h.lanes.stop("k").await.unwrap();
    assert_eq!(
        report,
        StopReport {
            cleared: 1,
            stopped_run: false
        }
    );
    settle_ms(1000).await;
    h.assert_no_new_run().await;
}

#[tokio::test(start_paused = true)]
async fn wait_idle_resolves_only_when_nothing_is_queued_or_running() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", turn(1, "a")).await;
    h.submit("k", turn(2, "b")).await;
    let a = h.next_run().await;
    let lanes = h.lanes.clone();
    let idle = tokio::spawn(async move { lanes.wait_idle("k").await });
    settle().await;
    assert!(!idle.is_finished());
    a.finish(0);
    let b = h.next_run().await;
    settle().await;
    assert!(!idle.is_finished());
    b.finish(0);
    idle.await.unwrap().unwrap();
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (0, false));
}

#[tokio::test(start_paused = true)]
async fn the_global_limit_holds_a_second_session_until_the_first_run_ends() {
    let mut h = Harness::new(settings(QueueMode::Followup), 1);
    h.submit("one", turn(1, "a")).await;
    let a = h.next_run().await;
    assert_eq!(a.key, "one");
    h.submit("two", turn(2, "b")).await;
    h.assert_no_new_run().await;
    a.finish(0);
    let b = h.next_run().await;
    assert_eq!(b.key, "two");
    let log = h.log();
    assert_eq!(log[1], Ev::Returned("a".into(), RunStatus::Ok));
    assert_eq!(log[2], Ev::Started("b".into()));
    b.finish(0);
}

#[tokio::test(start_paused = true)]
async fn set_settings_persists_for_a_new_lane_set_over_the_same_store() {
    let h = Harness::new(settings(QueueMode::Steer), 8);
    let custom = LaneSettings {
        cap: 3,
        drop: DropPolicy::New,
        ..settings(QueueMode::Collect)
    };
    assert_eq!(h.lanes.set_settings("k", Some(custom)).await.unwrap(), custom);
    assert_eq!(h.lanes.status("k").await.unwrap().settings, custom);

    let again = Harness::over(h.store.clone(), settings(QueueMode::Followup), 8);
    assert_eq!(again.lanes.settings_for("k"), custom);
    assert_eq!(again.lanes.status("k").await.unwrap().settings, custom);
    assert_eq!(
        again.lanes.settings_for("other"),
        settings(QueueMode::Followup)
    );

    let back = again.lanes.set_settings("k", None).await.unwrap();
    assert_eq!(back, settings(QueueMode::Followup));
    assert_eq!(h.lanes.settings_for("k"), settings(QueueMode::Steer));
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_active_runs_keeps_queued_turns_and_ends_lanes() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    let mut turns = Vec::new();
    for (key, text) in [("one", "a"), ("one", "b"), ("two", "c")] {
        turns.push((key, h.durable(key, text).await));
    }
    let queued = turns[1].1.seqs[0];
    for (key, t) in turns {
        h.submit(key, t).await;
    }
    let _a = h.next_run().await;
    let _c = h.next_run().await;
    h.lanes.shutdown().await;
    let mut log = h.log();
    log.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        log,
        [
            Ev::Returned("a".into(), RunStatus::Aborted),
            Ev::Returned("c".into(), RunStatus::Aborted),
            Ev::Started("a".into()),
            Ev::Started("c".into()),
        ]
    );
    assert!(h.pending_seqs("one").contains(&queued));
    assert!(matches!(
        h.lanes.submit("one", turn(9, "late")).await,
        Err(LaneError::Closed)
    ));
    h.assert_no_new_run().await;
}
