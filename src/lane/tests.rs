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

/// What the fake runner and the test saw, in order (`start a`, `took b`, `end a Ok`, ...).
type Log = Arc<Mutex<Vec<String>>>;

/// One run the fake runner started. Dropping it lets the run return like `finish(0)`.
struct RunHandle {
    key: String,
    text: String,
    seqs: Vec<u64>,
    finish: oneshot::Sender<usize>,
}

impl RunHandle {
    /// Its turn's text and seqs.
    fn turn(&self) -> (&str, &[u64]) {
        (&self.text, &self.seqs)
    }

    /// Lets the run return `Ok` after consuming up to `take_steers` steered messages; the
    /// rest come back as `leftover`.
    fn finish(self, take_steers: usize) {
        let _ = self.finish.send(take_steers);
    }
}

/// Records every run and holds it until its handle is released or its token fires (then it
/// takes a virtual second to settle and returns `Aborted`).
struct FakeRunner {
    log: Log,
    started: mpsc::UnboundedSender<RunHandle>,
    /// Seqs the lane said were dropped.
    dropped: Arc<Mutex<Vec<u64>>>,
    /// Texts of turns that had to wait for a slot.
    waiting: Arc<Mutex<Vec<String>>>,
    /// As on a cluster: the store whose waiting messages a turn may not overtake (a run
    /// removes its turn's), and the seqs the lane gave back.
    cluster: Option<(Store, Arc<Mutex<Vec<u64>>>)>,
}

impl Runner for FakeRunner {
    fn run(
        &self,
        key: String,
        turn: QueuedTurn,
        cancel: CancellationToken,
        mut steer: mpsc::Receiver<Box<Steer>>,
    ) -> BoxFuture<'static, RunOutcome> {
        let log = self.log.clone();
        log.lock().unwrap().push(format!("start {}", turn.text));
        let settles = self.cluster.as_ref().map(|(store, _)| store.clone());
        let (finish, finished) = oneshot::channel();
        let (text, seqs) = (turn.text.clone(), turn.seqs.clone());
        let _ = self.started.send(RunHandle {
            key,
            text,
            seqs,
            finish,
        });
        Box::pin(async move {
            let (status, take) = tokio::select! {
                _ = cancel.cancelled() => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    (RunStatus::Aborted, 0)
                }
                take = finished => (RunStatus::Ok, take.unwrap_or(0)),
            };
            let mut steered_seqs = Vec::new();
            for _ in 0..take {
                let Ok(s) = steer.try_recv() else { break };
                log.lock().unwrap().push(format!("took {}", s.text));
                steered_seqs.extend(s.seqs);
            }
            steer.close();
            let mut leftover = Vec::new();
            while let Ok(s) = steer.try_recv() {
                leftover.push(*s);
            }
            if let Some(store) = &settles {
                for seq in &turn.seqs {
                    store.remove_pending(*seq).unwrap();
                }
            }
            let end = format!("end {} {status:?}", turn.text);
            log.lock().unwrap().push(end);
            let usage = Default::default();
            let text = String::new();
            RunOutcome {
                status,
                text,
                steered_seqs,
                leftover,
                usage,
                context_tokens: 0,
                cost_usd: None,
            }
        })
    }

    fn notice(&self, to: &chela_channel::Conversation, text: String) {
        assert_eq!(to.chat_id, "me");
        self.log.lock().unwrap().push(format!("notice {text}"));
    }

    fn dropped(&self, _key: &str, seqs: &[u64]) {
        self.dropped.lock().unwrap().extend_from_slice(seqs);
    }

    fn waiting(&self, turn: &QueuedTurn) -> BoxFuture<'static, std::convert::Infallible> {
        self.waiting.lock().unwrap().push(turn.text.clone());
        Box::pin(std::future::pending())
    }

    fn hold(&self, key: &str, turn: &QueuedTurn) -> Hold {
        let Some((store, _)) = &self.cluster else {
            return Hold::Go;
        };
        let first = turn.seqs.iter().min().unwrap();
        let pending = store.pending_for(key).unwrap();
        Hold::Older(
            pending
                .into_iter()
                .map(|(s, _)| s)
                .filter(|s| s < first)
                .collect(),
        )
    }

    fn give_back(&self, _key: &str, seqs: &[u64]) {
        let (_, given_back) = self.cluster.as_ref().expect("given back alone");
        given_back.lock().unwrap().extend_from_slice(seqs);
    }
}

fn settings(mode: QueueMode) -> LaneSettings {
    LaneSettings {
        mode,
        debounce: Duration::from_millis(500),
        cap: 20,
        drop: DropPolicy::Summarize,
    }
}

/// Followup with a cap of 2 and `drop`.
fn capped(drop: DropPolicy) -> LaneSettings {
    LaneSettings {
        cap: 2,
        drop,
        ..settings(QueueMode::Followup)
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

/// A turn with pending seq `seq` in authorization context `context`.
fn turn_in(seq: u64, text: &str, context: &str) -> QueuedTurn {
    QueuedTurn {
        seqs: vec![seq],
        text: text.into(),
        sender: "ann".into(),
        context: context.into(),
        target: conversation(),
        quote: None,
        files: Vec::new(),
        scheduled: false,
        queued_ms: 0,
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

struct Harness {
    lanes: Lanes,
    store: Store,
    log: Log,
    runs: mpsc::UnboundedReceiver<RunHandle>,
    dropped: Arc<Mutex<Vec<u64>>>,
    waiting: Arc<Mutex<Vec<String>>>,
}

impl Harness {
    fn new(defaults: LaneSettings, max_runs: usize) -> Self {
        Self::over(Store::temporary().unwrap(), defaults, max_runs)
    }

    fn over(store: Store, defaults: LaneSettings, max_runs: usize) -> Self {
        Self::built(store, defaults, max_runs, None)
    }

    /// A lane as on a cluster: a turn does not overtake the session's older waiting
    /// messages, and the seqs given back are collected in `given_back`.
    fn clustered(defaults: LaneSettings, given_back: Arc<Mutex<Vec<u64>>>) -> Self {
        let store = Store::temporary().unwrap();
        Self::built(store.clone(), defaults, 4, Some((store, given_back)))
    }

    fn built(
        store: Store,
        defaults: LaneSettings,
        max_runs: usize,
        cluster: Option<(Store, Arc<Mutex<Vec<u64>>>)>,
    ) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (started, runs) = mpsc::unbounded_channel();
        let dropped = Arc::new(Mutex::new(Vec::new()));
        let waiting = Arc::new(Mutex::new(Vec::new()));
        let runner = Arc::new(FakeRunner {
            log: log.clone(),
            started,
            dropped: dropped.clone(),
            waiting: waiting.clone(),
            cluster,
        });
        let lanes = Lanes::new(runner, store.clone(), defaults, max_runs);
        Harness {
            lanes,
            store,
            log,
            runs,
            dropped,
            waiting,
        }
    }

    /// Turns for `key` backed by durable pending entries. Create them before submitting
    /// anything: the store's flush may let the paused clock move.
    async fn durable(&self, key: &str, texts: &[&str]) -> Vec<QueuedTurn> {
        let mut turns = Vec::new();
        for text in texts {
            let inbound = chela_channel::Inbound {
                conversation: conversation(),
                sender: Default::default(),
                message_id: text.to_string(),
                text: text.to_string(),
                reply_to: None,
                mentioned: false,
                timestamp_ms: 0,
                interaction: None,
                attachments: Vec::new(),
            };
            let pending = PendingTurn {
                session_key: key.into(),
                inbound,
                queued_ms: 0,
            };
            turns.push(turn(self.store.enqueue(&pending).await.unwrap(), text));
        }
        turns
    }

    fn pending_seqs(&self, key: &str) -> Vec<u64> {
        let pending = self.store.pending_for(key).unwrap();
        pending.into_iter().map(|(seq, _)| seq).collect()
    }

    async fn submit(&self, key: &str, turns: impl IntoIterator<Item = QueuedTurn>) {
        for turn in turns {
            self.lanes.submit(key, turn).await.unwrap();
        }
    }

    /// The next run to start (fails if none starts within a minute of virtual time).
    async fn next_run(&mut self) -> RunHandle {
        let next = tokio::time::timeout(Duration::from_secs(60), self.runs.recv()).await;
        next.expect("a run should start").unwrap()
    }

    /// Releases the next `n` runs one by one, then waits until `key` is idle.
    async fn finish_runs(&mut self, key: &str, n: usize) {
        for _ in 0..n {
            self.next_run().await.finish(0);
        }
        self.lanes.wait_idle(key).await.unwrap();
    }

    /// Asserts that no run started since the last `next_run`.
    async fn assert_no_new_run(&mut self) {
        settle().await;
        if let Ok(run) = self.runs.try_recv() {
            panic!("unexpected run of {:?}", run.text);
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Texts of every run started so far.
    fn started(&self) -> Vec<String> {
        let log = self.log();
        let started = log.iter().filter_map(|e| e.strip_prefix("start "));
        started.map(String::from).collect()
    }
}

#[tokio::test(start_paused = true)]
async fn followup_runs_one_turn_at_a_time_in_fifo_order() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(0, "a"), turn(1, "b"), turn(2, "c")])
        .await;
    let a = h.next_run().await;
    assert_eq!(
        (a.key.as_str(), a.text.as_str(), a.seqs.clone()),
        ("k", "a", vec![0])
    );
    h.assert_no_new_run().await;
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (2, true));
    a.finish(0);
    let b = h.next_run().await;
    assert_eq!(b.text, "b");
    h.assert_no_new_run().await;
    b.finish(0);
    h.finish_runs("k", 1).await;
    assert_eq!(h.started(), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn steer_during_a_run_is_injected_not_queued() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", [turn(1, "a")]).await;
    let a = h.next_run().await;
    h.submit("k", [turn(2, "b")]).await;
    settle().await;
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (0, true));
    h.assert_no_new_run().await;
    a.finish(1);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.log(), ["start a", "took b", "end a Ok"]);
}

#[tokio::test(start_paused = true)]
async fn a_steered_message_never_overtakes_older_ones_waiting_in_the_queue() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", [turn(1, "a")]).await;
    let a = h.next_run().await;
    h.submit("k", [turn(2, "b"), turn(3, "c"), turn(4, "d")])
        .await;
    settle().await;
    // `a` takes `b`; `c` and `d` come back: `c` runs, `d` waits in the queue.
    a.finish(1);
    let c = h.next_run().await;
    assert_eq!(c.turn(), ("c", &[3][..]));
    // A newer message goes behind `d`, not into `c`'s run ahead of it.
    h.submit("k", [turn(5, "e")]).await;
    settle().await;
    c.finish(1);
    let d = h.next_run().await;
    assert_eq!(d.turn(), ("d", &[4][..]));
    d.finish(0);
    let e = h.next_run().await;
    assert_eq!(e.turn(), ("e", &[5][..]));
    e.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "c", "d", "e"]);
}

#[tokio::test(start_paused = true)]
async fn a_scheduled_turn_waits_for_the_running_one_in_steer_and_interrupt_modes() {
    for mode in [QueueMode::Steer, QueueMode::Interrupt] {
        let mut h = Harness::new(settings(mode), 8);
        h.submit("k", [turn(1, "a")]).await;
        let a = h.next_run().await;
        let job = QueuedTurn {
            scheduled: true,
            ..turn(2, "job")
        };
        h.submit("k", [job]).await;
        settle().await;
        let status = h.lanes.status("k").await.unwrap();
        assert_eq!((status.queued, status.running), (1, true), "{mode:?}");
        a.finish(1);
        let job = h.next_run().await;
        assert_eq!(job.turn(), ("job", &[2][..]), "{mode:?}");
        job.finish(0);
        h.lanes.wait_idle("k").await.unwrap();
        assert_eq!(
            h.log()[..3],
            ["start a", "end a Ok", "start job"],
            "{mode:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn steers_the_run_left_unconsumed_run_next_as_followups_in_order() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", [turn(1, "a")]).await;
    let a = h.next_run().await;
    h.submit("k", [turn(2, "b"), turn(3, "c"), turn(4, "d")])
        .await;
    settle().await;
    a.finish(1);
    let c = h.next_run().await;
    assert_eq!(c.turn(), ("c", &[3][..]));
    c.finish(0);
    let d = h.next_run().await;
    assert_eq!(d.turn(), ("d", &[4][..]));
    d.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.started(), ["a", "c", "d"]);
}

#[tokio::test(start_paused = true)]
async fn collect_waits_for_the_quiet_window_then_runs_one_merged_turn() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    h.submit("k", [turn(1, "one")]).await;
    settle_ms(300).await;
    h.submit("k", [turn(2, "two")]).await;
    // 450 ms after the last message: still inside the 500 ms window.
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
    h.submit("k", [turn(1, "first")]).await;
    settle_ms(600).await;
    let first = h.next_run().await;
    assert_eq!(first.text, "first");
    h.submit("k", [turn(2, "x"), turn(3, "y"), turn(4, "z")])
        .await;
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
    let turns = [("a", "x"), ("b", "y"), ("c", "y"), ("d", "x")];
    let turns = turns
        .iter()
        .zip(1..)
        .map(|((t, c), seq)| turn_in(seq, t, c));
    h.submit("k", turns).await;
    settle_ms(600).await;
    let a = h.next_run().await;
    assert_eq!(a.turn(), ("a", &[1][..]));
    a.finish(0);
    let bc = h.next_run().await;
    assert!(bc.text.starts_with(COLLECT_HEADER), "{}", bc.text);
    assert_eq!(bc.seqs, vec![2, 3]);
    bc.finish(0);
    let d = h.next_run().await;
    assert_eq!(d.turn(), ("d", &[4][..]));
    d.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn interrupt_cancels_the_active_run_and_runs_the_newest_next() {
    let mut h = Harness::new(settings(QueueMode::Interrupt), 8);
    h.submit("k", [turn(1, "a")]).await;
    let _a = h.next_run().await;
    h.submit("k", [turn(2, "b"), turn(3, "c")]).await;
    let next = h.next_run().await;
    assert_eq!(next.text, "c");
    assert_eq!(h.log()[1], "end a Aborted");
}

#[tokio::test(start_paused = true)]
async fn drop_new_rejects_the_incoming_turn_and_tells_the_sender() {
    let mut h = Harness::new(capped(DropPolicy::New), 8);
    let turns = h.durable("k", &["a", "b", "c", "d"]).await;
    let rejected = turns[3].seqs[0];
    h.submit("k", turns).await;
    let a = h.next_run().await;
    settle().await;
    let noticed = |e: &String| e.starts_with("notice Queue full");
    assert!(h.log().iter().any(noticed), "{:?}", h.log());
    assert!(!h.pending_seqs("k").contains(&rejected));
    a.finish(0);
    h.finish_runs("k", 2).await;
    assert_eq!(h.started(), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn drop_old_discards_the_oldest_queued_turn() {
    let mut h = Harness::new(capped(DropPolicy::Old), 8);
    let turns = h.durable("k", &["a", "b", "c", "d"]).await;
    let dropped = turns[1].seqs[0];
    h.submit("k", turns).await;
    let a = h.next_run().await;
    settle().await;
    assert!(!h.pending_seqs("k").contains(&dropped));
    a.finish(0);
    h.finish_runs("k", 2).await;
    assert_eq!(h.started(), ["a", "c", "d"]);
    assert!(!h.log().iter().any(|e| e.starts_with("notice")));
}

#[tokio::test(start_paused = true)]
async fn drop_summarize_runs_a_queue_overflow_turn_first() {
    let mut h = Harness::new(capped(DropPolicy::Summarize), 8);
    h.submit(
        "k",
        [turn(1, "a"), turn(2, "b"), turn(3, "c"), turn(4, "d")],
    )
    .await;
    h.next_run().await.finish(0);
    let summary = h.next_run().await;
    assert!(
        summary.text.starts_with(OVERFLOW_HEADER),
        "{}",
        summary.text
    );
    assert!(summary.text.contains("- ann: b"), "{}", summary.text);
    assert_eq!(summary.seqs, vec![2]);
    summary.finish(0);
    h.finish_runs("k", 2).await;
    assert_eq!(h.started()[2..], ["c", "d"]);
}

#[tokio::test(start_paused = true)]
async fn stop_clears_the_queue_and_answers_after_the_run_returned() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    let turns = h.durable("k", &["a", "b", "c"]).await;
    h.submit("k", turns).await;
    let _a = h.next_run().await;
    let report = h.lanes.stop("k").await.unwrap();
    h.log.lock().unwrap().push("stop answered".into());
    assert_eq!(
        report,
        StopReport {
            cleared: 2,
            stopped_run: true
        }
    );
    assert_eq!(h.log(), ["start a", "end a Aborted", "stop answered"]);
    h.lanes.wait_idle("k").await.unwrap();
    h.assert_no_new_run().await;
    // The cleared turns' durable entries are gone (the runner owns the active one's).
    assert_eq!(h.pending_seqs("k").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn stop_without_an_active_run_reports_no_run_stopped() {
    let mut h = Harness::new(settings(QueueMode::Collect), 8);
    assert_eq!(h.lanes.stop("k").await.unwrap(), StopReport::default());
    // Inside the collect window a turn is queued but no run is active yet.
    h.submit("k", [turn(1, "a")]).await;
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
    h.submit("k", [turn(1, "a"), turn(2, "b")]).await;
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
    h.submit("one", [turn(1, "a")]).await;
    let a = h.next_run().await;
    assert_eq!(a.key, "one");
    h.submit("two", [turn(2, "b")]).await;
    h.assert_no_new_run().await;
    assert_eq!(*h.waiting.lock().unwrap(), ["b"], "b is shown as waiting");
    a.finish(0);
    let b = h.next_run().await;
    assert_eq!(b.key, "two");
    assert_eq!(h.log()[1..], ["end a Ok", "start b"]);
    assert_eq!(*h.waiting.lock().unwrap(), ["b"], "a got its slot at once");
}

#[tokio::test(start_paused = true)]
async fn stop_of_a_run_waiting_for_the_global_limit_answers_at_once() {
    let mut h = Harness::new(settings(QueueMode::Followup), 1);
    h.submit("one", [turn(1, "a")]).await;
    let a = h.next_run().await;
    h.submit("two", [turn(2, "b")]).await;
    settle().await;
    let stop = tokio::time::timeout(Duration::from_secs(60), h.lanes.stop("two")).await;
    assert!(stop.is_ok(), "/stop on `two` waited for the run of `one`");
    a.finish(0);
    settle().await;
    assert_eq!(
        h.started(),
        ["a"],
        "a stopped turn still reached the runner"
    );
}

#[tokio::test(start_paused = true)]
async fn set_settings_persists_for_a_new_lane_set_over_the_same_store() {
    let h = Harness::new(settings(QueueMode::Steer), 8);
    let custom = LaneSettings {
        cap: 3,
        drop: DropPolicy::New,
        ..settings(QueueMode::Collect)
    };
    assert_eq!(
        h.lanes.set_settings("k", Some(custom)).await.unwrap(),
        custom
    );
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
async fn a_lane_that_went_idle_for_long_still_takes_turns_with_its_settings() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    let custom = settings(QueueMode::Followup);
    h.lanes.set_settings("k", Some(custom)).await.unwrap();
    h.submit("k", [turn(1, "a")]).await;
    h.finish_runs("k", 1).await;
    settle_ms(3_600_000).await;
    h.submit("k", [turn(2, "b"), turn(3, "c")]).await;
    let b = h.next_run().await;
    assert_eq!(b.text, "b");
    assert_eq!(h.lanes.status("k").await.unwrap().settings, custom);
    b.finish(0);
    h.finish_runs("k", 1).await;
}

#[test]
fn a_lane_message_is_small_since_every_mailbox_allocates_blocks_of_them() {
    // A whole turn is over 200 bytes; the settings (the largest variant left) about 40.
    assert!(
        std::mem::size_of::<LaneMsg>() <= 64,
        "{}",
        std::mem::size_of::<LaneMsg>()
    );
}

/// How long an idle lane lives (issue #11: idle lanes go soon after their last turn), in ms.
const LANE_IDLE_MS: u64 = task::IDLE_EXIT.as_millis() as u64;

/// How many lane tasks run, and how many mailboxes the lane map holds.
fn lanes_alive(lanes: &Lanes) -> (usize, usize) {
    (lanes.tasks.len(), lanes.shared.lanes.lock().unwrap().len())
}

#[tokio::test(start_paused = true)]
async fn an_idle_lane_ends_after_its_idle_time_and_the_next_turn_runs_once_in_a_new_one() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(1, "a")]).await;
    h.finish_runs("k", 1).await;
    assert_eq!(lanes_alive(&h.lanes), (1, 1));
    settle_ms(LANE_IDLE_MS - 100).await;
    assert_eq!(lanes_alive(&h.lanes), (1, 1), "ended before its idle time");
    settle_ms(200).await;
    assert_eq!(
        lanes_alive(&h.lanes),
        (0, 0),
        "the idle lane should have ended"
    );
    h.submit("k", [turn(2, "b")]).await;
    h.next_run().await.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    h.assert_no_new_run().await;
    assert_eq!(h.started(), ["a", "b"]);
    assert_eq!(lanes_alive(&h.lanes).0, 1);
}

#[tokio::test(start_paused = true)]
async fn asking_which_sessions_run_keeps_no_idle_lane_alive() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(1, "a")]).await;
    let run = h.next_run().await;
    assert_eq!(h.lanes.running_sessions().await, ["k"]);
    run.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    // A cluster's heartbeat asks every tick; the lane still retires after its idle time.
    for _ in 0..(2 * LANE_IDLE_MS / 100) {
        assert!(h.lanes.running_now().is_empty());
        settle_ms(100).await;
    }
    assert_eq!(lanes_alive(&h.lanes), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_turn_arriving_as_the_idle_time_runs_out_runs_exactly_once() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(1, "a")]).await;
    h.finish_runs("k", 1).await;
    // Every task waits; the clock then reaches the lane's idle deadline and the turn is
    // submitted before the lane task has had a chance to run.
    settle_ms(LANE_IDLE_MS - 1).await;
    tokio::time::advance(Duration::from_millis(1)).await;
    h.lanes.submit("k", turn(2, "b")).await.unwrap();
    let b = h.next_run().await;
    assert_eq!(b.text, "b");
    b.finish(0);
    h.lanes.wait_idle("k").await.unwrap();
    settle_ms(LANE_IDLE_MS + 1_000).await;
    h.assert_no_new_run().await;
    assert_eq!(h.started(), ["a", "b"]);
    assert_eq!(lanes_alive(&h.lanes), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_active_runs_keeps_queued_turns_and_ends_lanes() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    let one = h.durable("one", &["a", "b"]).await;
    let queued = one[1].seqs[0];
    let two = h.durable("two", &["c"]).await;
    h.submit("one", one).await;
    h.submit("two", two).await;
    let (_a, _c) = (h.next_run().await, h.next_run().await);
    h.lanes.shutdown().await;
    let mut log = h.log();
    log.sort();
    assert_eq!(
        log,
        ["end a Aborted", "end c Aborted", "start a", "start c"]
    );
    assert!(h.pending_seqs("one").contains(&queued));
    let late = h.lanes.submit("one", turn(9, "late")).await;
    assert!(matches!(late, Err(LaneError::Closed)));
    h.assert_no_new_run().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_keeps_a_turn_that_waited_for_the_global_limit() {
    let mut h = Harness::new(settings(QueueMode::Followup), 1);
    let one = h.durable("one", &["a"]).await;
    let two = h.durable("two", &["b"]).await;
    let waiting = two[0].seqs[0];
    h.submit("one", one).await;
    let _a = h.next_run().await;
    h.submit("two", two).await;
    settle().await;
    h.lanes.shutdown().await;
    assert_eq!(h.started(), ["a"]);
    assert_eq!(
        h.pending_seqs("two"),
        [waiting],
        "a turn that never got a slot must run at the next start"
    );
}

#[tokio::test(start_paused = true)]
async fn drain_lets_the_running_turn_finish_and_starts_nothing_new() {
    let mut h = Harness::new(settings(QueueMode::Followup), 1);
    let one = h.durable("one", &["a", "b"]).await;
    let queued = one[1].seqs[0];
    let two = h.durable("two", &["c"]).await;
    let waiting = two[0].seqs[0];
    h.submit("one", one).await;
    let a = h.next_run().await;
    h.submit("two", two).await;
    settle().await;
    let drain = {
        let lanes = h.lanes.clone();
        tokio::spawn(async move { lanes.drain(Duration::from_secs(30)).await })
    };
    settle().await;
    a.finish(0);
    assert_eq!(drain.await.unwrap(), 0, "no run left going");
    h.assert_no_new_run().await;
    h.lanes.shutdown().await;
    assert_eq!(h.log(), ["start a", "end a Ok"]);
    // (The fake runner settles nothing, so `a` is still there too.)
    assert!(h.pending_seqs("one").contains(&queued));
    assert_eq!(h.pending_seqs("two"), [waiting]);
}

#[tokio::test(start_paused = true)]
async fn drain_gives_up_after_the_grace() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("one", [turn(1, "a")]).await;
    let _a = h.next_run().await;
    let started = tokio::time::Instant::now();
    assert_eq!(h.lanes.drain(Duration::from_secs(3)).await, 1);
    assert!(started.elapsed() >= Duration::from_secs(3));
    h.lanes.shutdown().await;
    assert_eq!(h.log(), ["start a", "end a Aborted"]);
}

#[tokio::test(start_paused = true)]
async fn a_grace_too_long_for_the_clock_neither_panics_nor_waits_when_idle() {
    let h = Harness::new(settings(QueueMode::Followup), 8);
    // `Instant + Duration::from_secs(u64::MAX)` panics; the drain's deadline saturates.
    assert_eq!(h.lanes.drain(Duration::from_secs(u64::MAX)).await, 0);
    h.lanes.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_transcript_write_waits_for_the_run_and_goes_before_the_next_turn() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(0, "a")]).await;
    let a = h.next_run().await;
    let log = h.log.clone();
    let written = h
        .lanes
        .queue_transcript_write("k", move || log.lock().unwrap().push("write".into()))
        .await
        .unwrap();
    h.submit("k", [turn(1, "b")]).await;
    settle().await;
    assert_eq!(h.log(), ["start a"], "no write while the run is active");
    a.finish(0);
    written.await.unwrap();
    h.finish_runs("k", 1).await;
    assert_eq!(
        h.log(),
        ["start a", "end a Ok", "write", "start b", "end b Ok"]
    );
    // With no run active it runs at once, and the caller gets its result.
    let answer = h.lanes.write_transcript("k", || 7).await.unwrap();
    assert_eq!(answer, 7);
}

#[tokio::test(start_paused = true)]
async fn running_sessions_lists_only_lanes_with_an_active_run() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("busy", [turn(0, "a")]).await;
    h.submit("idle", [turn(1, "b")]).await;
    let first = h.next_run().await;
    let second = h.next_run().await;
    let idle = if first.key == "idle" { first } else { second };
    idle.finish(0);
    h.lanes.wait_idle("idle").await.unwrap();
    assert_eq!(h.lanes.running_sessions().await, ["busy"]);
}

/// A job for `key` that logs its start, then waits for `release` or its token.
fn logged_job(
    log: &Log,
    name: &'static str,
    release: oneshot::Receiver<()>,
) -> impl FnOnce(CancellationToken) -> BoxFuture<'static, &'static str> + Send + 'static {
    let log = log.clone();
    move |cancel| {
        Box::pin(async move {
            log.lock().unwrap().push(format!("job {name}"));
            tokio::select! {
                _ = release => {
                    log.lock().unwrap().push(format!("job {name} done"));
                    "done"
                }
                _ = cancel.cancelled() => "cancelled",
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_waits_for_the_run_holds_the_lane_and_goes_before_the_next_turn() {
    let mut h = Harness::new(settings(QueueMode::Steer), 8);
    h.submit("k", [turn(0, "a")]).await;
    let a = h.next_run().await;
    let (release, held) = oneshot::channel();
    let lanes = h.lanes.clone();
    let job = logged_job(&h.log, "compact", held);
    let result = tokio::spawn(async move { lanes.run_job("k", job).await });
    settle().await;
    a.finish(0);
    settle().await;
    // A message arriving while the job works is queued (no steer reaches a job), and a
    // transcript write waits for the job's end.
    h.submit("k", [turn(1, "b")]).await;
    let log = h.log.clone();
    let written = h
        .lanes
        .queue_transcript_write("k", move || log.lock().unwrap().push("write".into()))
        .await
        .unwrap();
    h.assert_no_new_run().await;
    release.send(()).unwrap();
    assert_eq!(result.await.unwrap().unwrap(), "done");
    written.await.unwrap();
    h.finish_runs("k", 1).await;
    assert_eq!(
        h.log(),
        [
            "start a",
            "end a Ok",
            "job compact",
            "job compact done",
            "write",
            "start b",
            "end b Ok"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn stop_cancels_a_running_job_and_drops_one_not_started() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(0, "a")]).await;
    let a = h.next_run().await;
    let (_keep_first, first_held) = oneshot::channel();
    let lanes = h.lanes.clone();
    let first = logged_job(&h.log, "first", first_held);
    let first = tokio::spawn(async move { lanes.run_job("k", first).await });
    settle().await;
    a.finish(0);
    settle().await;
    let (_keep_second, second_held) = oneshot::channel();
    let lanes = h.lanes.clone();
    let second = logged_job(&h.log, "second", second_held);
    let second = tokio::spawn(async move { lanes.run_job("k", second).await });
    settle().await;
    let report = h.lanes.stop("k").await.unwrap();
    assert!(report.stopped_run, "the running job counts as stopped");
    assert_eq!(first.await.unwrap().unwrap(), "cancelled");
    assert!(matches!(second.await.unwrap(), Err(LaneError::Stopped)));
    h.lanes.wait_idle("k").await.unwrap();
    assert_eq!(h.log(), ["start a", "end a Ok", "job first"]);
}

#[tokio::test(start_paused = true)]
async fn turns_dropped_by_stop_or_the_cap_are_reported_to_the_runner() {
    let mut h = Harness::new(capped(DropPolicy::New), 8);
    let turns = h.durable("k", &["a", "b", "c", "d"]).await;
    let seqs: Vec<u64> = turns.iter().flat_map(|t| t.seqs.clone()).collect();
    h.submit("k", turns).await;
    let a = h.next_run().await;
    settle().await;
    assert_eq!(*h.dropped.lock().unwrap(), [seqs[3]], "the cap rejected d");
    let stopping = h.lanes.clone();
    let stop = tokio::spawn(async move { stopping.stop("k").await });
    settle().await;
    drop(a);
    stop.await.unwrap().unwrap();
    let mut dropped = h.dropped.lock().unwrap().clone();
    dropped.sort_unstable();
    assert_eq!(
        dropped,
        [seqs[1], seqs[2], seqs[3]],
        "/stop cleared b and c"
    );
    // Only a's is left: settling a run's own turn is the (fake) runner's job.
    assert_eq!(h.pending_seqs("k"), [seqs[0]]);
}

/// Every live lane holds a mailbox allocating room for 32 messages at once: its messages
/// stay small.
#[test]
fn lane_messages_stay_small() {
    assert!(std::mem::size_of::<LaneMsg>() <= 24);
}

#[tokio::test(start_paused = true)]
async fn a_turn_handed_over_again_while_queued_or_running_runs_once() {
    let mut h = Harness::new(settings(QueueMode::Followup), 8);
    h.submit("k", [turn(0, "a"), turn(1, "b")]).await;
    let a = h.next_run().await;
    // A cluster node that lost a partition for a moment and took it back hands the same
    // pending turns over again: the running one and the queued one.
    h.submit("k", [turn(0, "a"), turn(1, "b"), turn(2, "c")])
        .await;
    settle().await;
    let status = h.lanes.status("k").await.unwrap();
    assert_eq!((status.queued, status.running), (2, true));
    a.finish(0);
    h.finish_runs("k", 2).await;
    assert_eq!(h.started(), ["a", "b", "c"]);
    // Once it ran, the same seq handed over again is a new hand-over (the store decides
    // whether it is still pending; the lane no longer holds it).
    h.submit("k", [turn(0, "a")]).await;
    h.finish_runs("k", 1).await;
    assert_eq!(h.started(), ["a", "b", "c", "a"]);
}

#[tokio::test(start_paused = true)]
async fn a_turn_does_not_overtake_an_older_message_waiting_outside_its_lane() {
    let given_back = Arc::new(Mutex::new(Vec::new()));
    let mut h = Harness::clustered(settings(QueueMode::Followup), given_back.clone());
    let turns = h.durable("k", &["a", "b", "c"]).await;
    let seqs: Vec<u64> = turns.iter().flat_map(|t| t.seqs.clone()).collect();
    // "a" waits outside the lane (its run was cut by a lost lease): "b" and "c" go back.
    h.submit("k", turns[1..].iter().cloned()).await;
    settle().await;
    assert!(
        h.log.lock().unwrap().is_empty(),
        "{:?}",
        h.log.lock().unwrap()
    );
    let mut back = given_back.lock().unwrap().clone();
    back.sort_unstable();
    back.dedup();
    assert_eq!(
        back, seqs,
        "the older one, the turn and what was queued after it"
    );
    assert_eq!(h.pending_seqs("k"), seqs, "nothing given back is dropped");
    // Handed out again in order, each runs once, oldest first.
    h.submit("k", turns).await;
    h.finish_runs("k", 3).await;
    let log = h.log.lock().unwrap().clone();
    let starts: Vec<&String> = log.iter().filter(|l| l.starts_with("start")).collect();
    assert_eq!(starts, ["start a", "start b", "start c"]);
    assert!(h.pending_seqs("k").is_empty());
}
