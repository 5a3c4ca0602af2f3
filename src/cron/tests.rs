use std::sync::Mutex;

use super::*;
use crate::domain::schedule::Schedule;

/// Epoch ms of the tests' start: 2025-01-06T00:00:00Z (a Monday).
const BASE_MS: u64 = 1_736_121_600_000;

/// A clock that moves with tokio's (paused) time, starting at `base_ms`.
struct TokioClock {
    base_ms: u64,
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + u64::try_from(self.start.elapsed().as_millis()).unwrap()
    }
}

/// Queues into the store like the gateway (dedupe key first) and notes each run queued:
/// (job, scheduled time, clock time when queued).
struct StoreFire {
    store: Store,
    clock: Arc<TokioClock>,
    fired: Mutex<Vec<(String, u64, u64)>>,
}

/// The runs of job `id` in `fired`: (scheduled, queued).
fn of(fired: &[(String, u64, u64)], id: &str) -> Vec<(u64, u64)> {
    fired
        .iter()
        .filter(|(job, _, _)| job == id)
        .map(|(_, due, at)| (*due, *at))
        .collect()
}

impl Fire for StoreFire {
    fn fire<'a>(
        &'a self,
        dedupe: &'a str,
        turn: PendingTurn,
    ) -> BoxFuture<'a, Result<Option<u64>, CronError>> {
        Box::pin(async move {
            let seq = self.store.enqueue_unique(dedupe, &turn).await?;
            if seq.is_some() {
                let mut parts = dedupe.split('|').skip(1);
                let id = parts.next().unwrap().to_owned();
                let due: u64 = parts.next().unwrap().parse().unwrap();
                self.fired
                    .lock()
                    .unwrap()
                    .push((id, due, self.clock.now_ms()));
            }
            Ok(seq)
        })
    }
}

fn job(id: &str, schedule: Schedule, missed: Missed, now_ms: u64) -> CronJob {
    CronJob {
        id: id.into(),
        next_ms: schedule.next_after(now_ms).unwrap(),
        schedule,
        session_key: "agent:main:telegram:direct:42".into(),
        isolated: false,
        target: Some(crate::store::contract_tests::chat("42")),
        message: "tick".into(),
        missed,
        origin: CronOrigin::Agent,
        created_ms: now_ms,
        last_ms: None,
        active_hours: None,
    }
}

/// A running scheduler over `store` whose clock reads `base_ms` now.
struct Running {
    fire: Arc<StoreFire>,
    clock: Arc<TokioClock>,
    sleeping: watch::Receiver<Option<u64>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn start(store: &Store, base_ms: u64) -> Running {
    start_with(store, base_ms, MAX_SLEEP)
}

fn start_with(store: &Store, base_ms: u64, max_sleep: Duration) -> Running {
    let clock = Arc::new(TokioClock {
        base_ms,
        start: tokio::time::Instant::now(),
    });
    let fire = Arc::new(StoreFire {
        store: store.clone(),
        clock: clock.clone(),
        fired: Mutex::new(Vec::new()),
    });
    let scheduler = Scheduler::new(
        store.clone(),
        clock.clone(),
        fire.clone(),
        Arc::new(Notify::new()),
    )
    .with_max_sleep(max_sleep);
    let sleeping = scheduler.watch();
    let stop = CancellationToken::new();
    let task = tokio::spawn(scheduler.run(stop.clone()));
    Running {
        fire,
        clock,
        sleeping,
        stop,
        task,
    }
}

impl Running {
    /// Lets the scheduler run until its clock reads `until_ms`: each step waits for it to
    /// go to sleep, then moves tokio's paused time to its wake-up (no other timer runs, so
    /// the store's disk syncs never let time jump).
    async fn run_until(&mut self, until_ms: u64) {
        loop {
            self.sleeping.changed().await.unwrap();
            let wake = self.sleeping.borrow_and_update().unwrap();
            let now = self.clock.now_ms();
            if wake > until_ms {
                tokio::time::advance(Duration::from_millis(until_ms - now)).await;
                return;
            }
            tokio::time::advance(Duration::from_millis(wake - now)).await;
        }
    }

    async fn stop(self) -> Vec<(String, u64, u64)> {
        self.stop.cancel();
        self.task.await.unwrap();
        self.fire.fired.lock().unwrap().clone()
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_every_minute_fires_once_per_minute_over_an_hour() {
    let store = Store::temporary().unwrap();
    let every = Schedule::every("1m", BASE_MS).unwrap();
    store
        .put_cron(&job("m", every, Missed::RunOnce, BASE_MS))
        .await
        .unwrap();
    let mut running = start(&store, BASE_MS);
    running.run_until(BASE_MS + 3_600_000).await;
    let fired = running.stop().await;
    let expected: Vec<(u64, u64)> = (1..=60)
        .map(|k| (BASE_MS + k * 60_000, BASE_MS + k * 60_000))
        .collect();
    assert_eq!(of(&fired, "m"), expected, "each minute once, on time");
    assert_eq!(store.all_pending().unwrap().len(), 60);
    let left = store.cron_job("m").unwrap().unwrap();
    assert_eq!(left.last_ms, Some(BASE_MS + 3_600_000));
    assert_eq!(left.next_ms, Some(BASE_MS + 3_660_000));
}

#[tokio::test(start_paused = true)]
async fn a_restart_neither_loses_nor_doubles_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    let store = Store::open(&path).unwrap();
    let every = Schedule::every("1m", BASE_MS).unwrap();
    store
        .put_cron(&job("m", every.clone(), Missed::RunOnce, BASE_MS))
        .await
        .unwrap();
    store
        .put_cron(&job("s", every, Missed::Skip, BASE_MS))
        .await
        .unwrap();
    let mut running = start(&store, BASE_MS);
    running.run_until(BASE_MS + 30 * 60_000 + 30_000).await;
    let before = running.stop().await;
    assert_eq!(before.len(), 60, "30 runs of each job");
    drop(store);
    // Down for ten minutes; then a new process on the same store.
    let store = Store::open(&path).unwrap();
    let restart = BASE_MS + 40 * 60_000 + 30_000;
    let mut running = start(&store, restart);
    running.run_until(BASE_MS + 60 * 60_000).await;
    let after = running.stop().await;
    let minutes = |runs: Vec<(u64, u64)>| -> Vec<u64> {
        runs.iter()
            .map(|(due, _)| (due - BASE_MS) / 60_000)
            .collect()
    };
    assert_eq!(minutes(of(&before, "m")), (1..=30).collect::<Vec<_>>());
    // `m` (run once): the missed minute 31 runs once, at the start; then 41..=60.
    let m = of(&after, "m");
    assert_eq!(
        m[0],
        (BASE_MS + 31 * 60_000, restart),
        "run once, at the start"
    );
    let mut expected = vec![31];
    expected.extend(41..=60);
    assert_eq!(minutes(m), expected);
    // `s` (skip): nothing missed runs; 41..=60 do.
    assert_eq!(minutes(of(&after, "s")), (41..=60).collect::<Vec<_>>());
    // Across both processes no scheduled time was queued twice.
    let mut ids: Vec<String> = store
        .all_pending()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t.inbound.message_id)
        .collect();
    let total = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!((ids.len(), total), (60 + 21 + 20, 60 + 21 + 20));
}

#[tokio::test(start_paused = true)]
async fn a_crash_between_queueing_and_moving_on_queues_the_run_once() {
    let store = Store::temporary().unwrap();
    let every = Schedule::every("1m", BASE_MS).unwrap();
    let j = job("m", every, Missed::RunOnce, BASE_MS);
    store.put_cron(&j).await.unwrap();
    let due = BASE_MS + 60_000;
    // The previous process queued the run at `due` and died before moving the job on.
    let to = j.target.clone().unwrap();
    store
        .enqueue_unique(&run_key("m", due), &turn_of(&j, to, due, due))
        .await
        .unwrap()
        .unwrap();
    let mut running = start(&store, due + 5_000);
    running.run_until(due + 10_000).await;
    let fired = running.stop().await;
    assert_eq!(fired, [], "the dedupe mark dropped the second enqueue");
    assert_eq!(store.all_pending().unwrap().len(), 1);
    let moved = store.cron_job("m").unwrap().unwrap();
    assert_eq!(moved.next_ms, Some(due + 60_000));
}

#[tokio::test(start_paused = true)]
async fn a_berlin_weekly_job_fires_at_1430_local_across_both_dst_changes() {
    let store = Store::temporary().unwrap();
    // 2025-03-20T00:00Z .. 2025-11-05: 33 Wednesdays, DST from 03-30 to 10-26.
    let start_ms = 1_742_428_800_000;
    let weekly = Schedule::cron("30 14 * * 3", Some("Europe/Berlin")).unwrap();
    store
        .put_cron(&job("w", weekly, Missed::RunOnce, start_ms))
        .await
        .unwrap();
    // Waking once a day at least keeps this quick; the runs are still slept to exactly.
    let mut running = start_with(&store, start_ms, Duration::from_secs(86_400));
    running.run_until(start_ms + 230 * 86_400_000).await;
    let fired = of(&running.stop().await, "w");
    let at: Vec<String> = fired
        .iter()
        .map(|(due, when)| {
            assert_eq!(due, when, "on time");
            crate::domain::schedule::iso(*due)
        })
        .collect();
    assert_eq!(at.len(), 32);
    assert_eq!(at[0], "2025-03-26T13:30:00Z"); // CET
    assert_eq!(at[1], "2025-04-02T12:30:00Z"); // CEST
    assert_eq!(at[30], "2025-10-22T12:30:00Z"); // CEST
    assert_eq!(at[31], "2025-10-29T13:30:00Z"); // CET
}

/// A scheduler on a fresh store and the paused clock, not started: (store, its fire, its
/// wake, it).
fn scheduler_by_hand() -> (Store, Arc<StoreFire>, Arc<Notify>, Scheduler) {
    let store = Store::temporary().unwrap();
    let clock = Arc::new(TokioClock {
        base_ms: BASE_MS,
        start: tokio::time::Instant::now(),
    });
    let fire = Arc::new(StoreFire {
        store: store.clone(),
        clock: clock.clone(),
        fired: Mutex::new(Vec::new()),
    });
    let wake = Arc::new(Notify::new());
    let scheduler = Scheduler::new(store.clone(), clock, fire.clone(), wake.clone());
    (store, fire, wake, scheduler)
}

#[tokio::test(start_paused = true)]
async fn without_jobs_the_scheduler_sets_no_timer_and_a_new_job_wakes_it() {
    let (store, fire, wake, scheduler) = scheduler_by_hand();
    let mut sleeping = scheduler.watch();
    let stop = CancellationToken::new();
    let task = tokio::spawn(scheduler.run(stop.clone()));
    sleeping.changed().await.unwrap();
    assert_eq!(*sleeping.borrow_and_update(), None);
    let at = Schedule::at("in 90s", BASE_MS).unwrap();
    store
        .put_cron(&job("once", at, Missed::RunOnce, BASE_MS))
        .await
        .unwrap();
    wake.notify_one();
    sleeping.changed().await.unwrap();
    assert_eq!(
        *sleeping.borrow_and_update(),
        Some(BASE_MS + 60_000),
        "capped at a minute"
    );
    tokio::time::advance(Duration::from_secs(60)).await;
    sleeping.changed().await.unwrap();
    assert_eq!(*sleeping.borrow_and_update(), Some(BASE_MS + 90_000));
    tokio::time::advance(Duration::from_secs(30)).await;
    sleeping.changed().await.unwrap();
    assert_eq!(*sleeping.borrow_and_update(), None, "nothing left");
    stop.cancel();
    task.await.unwrap();
    let fired = fire.fired.lock().unwrap().clone();
    assert_eq!(of(&fired, "once"), [(BASE_MS + 90_000, BASE_MS + 90_000)]);
    assert_eq!(
        store.cron_job("once").unwrap(),
        None,
        "a one-shot job goes after its run"
    );
}

#[tokio::test(start_paused = true)]
async fn on_a_shared_store_a_job_another_node_added_fires_without_a_wake() {
    let (store, fire, _wake, scheduler) = scheduler_by_hand();
    let scheduler = scheduler.shared();
    let mut sleeping = scheduler.watch();
    let stop = CancellationToken::new();
    let task = tokio::spawn(scheduler.run(stop.clone()));
    sleeping.changed().await.unwrap();
    assert_eq!(
        *sleeping.borrow_and_update(),
        Some(BASE_MS + 60_000),
        "no job, yet it looks again within a minute"
    );
    // Another node adds a job: nobody wakes this scheduler.
    let at = Schedule::at("in 30s", BASE_MS).unwrap();
    store
        .put_cron(&job("theirs", at, Missed::RunOnce, BASE_MS))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    sleeping.changed().await.unwrap();
    stop.cancel();
    task.await.unwrap();
    let fired = fire.fired.lock().unwrap().clone();
    assert_eq!(of(&fired, "theirs").len(), 1, "{fired:?}");
}

/// A config with one `[[cron]]` entry at `at` (RFC 3339) with `missed`, into chat 42.
fn config_with_at(at: &str, missed: Missed) -> crate::config::Config {
    let mut config = crate::config::Config::default();
    config.cron.push(crate::config::CronEntry {
        id: "once".into(),
        at: at.into(),
        message: "the dentist".into(),
        missed,
        channel: "telegram".into(),
        chat: "42".into(),
        ..Default::default()
    });
    config
}

#[tokio::test(start_paused = true)]
async fn a_config_one_shot_missed_while_down_follows_its_missed_policy() {
    // 2025-01-06T00:10:00Z, ten minutes after the tests' start.
    let at = "2025-01-06T00:10:00Z";
    let due = BASE_MS + 10 * 60_000;
    for (missed, runs) in [(Missed::RunOnce, 1), (Missed::Skip, 0)] {
        let store = Store::temporary().unwrap();
        let config = config_with_at(at, missed);
        jobs::seed_from(&store, &config, BASE_MS).await.unwrap();
        assert_eq!(store.cron_job("once").unwrap().unwrap().next_ms, Some(due));
        // Down across the time; the next start is an hour later.
        let restart = BASE_MS + 3_600_000;
        jobs::seed_from(&store, &config, restart).await.unwrap();
        let kept = store.cron_job("once").unwrap();
        assert_eq!(
            kept.map(|j| j.next_ms),
            Some(Some(due)),
            "kept for its policy"
        );
        let (_, fire, _, scheduler) = scheduler_by_hand();
        let scheduler = Scheduler {
            store: store.clone(),
            ..scheduler
        };
        assert_eq!(scheduler.pass(restart).await.unwrap(), None, "no run left");
        let fired = fire.fired.lock().unwrap().clone();
        assert_eq!(of(&fired, "once").len(), runs, "{missed:?}");
        assert_eq!(fire.store.all_pending().unwrap().len(), runs);
        assert!(store.cron_job("once").unwrap().is_none(), "done: removed");
        // A later start does not bring the passed entry back.
        jobs::seed_from(&store, &config, restart + 200_000)
            .await
            .unwrap();
        assert!(store.cron_job("once").unwrap().is_none());
    }
}

#[tokio::test]
async fn a_config_one_shot_changed_after_its_time_is_removed() {
    let store = Store::temporary().unwrap();
    jobs::seed_from(
        &store,
        &config_with_at("2025-01-06T00:10:00Z", Missed::RunOnce),
        BASE_MS,
    )
    .await
    .unwrap();
    let changed = config_with_at("2025-01-06T00:20:00Z", Missed::RunOnce);
    jobs::seed_from(&store, &changed, BASE_MS + 3_600_000)
        .await
        .unwrap();
    assert!(store.cron_job("once").unwrap().is_none());
}

#[test]
fn an_isolated_job_runs_in_its_own_session_and_answers_in_the_chat() {
    let every = Schedule::every("1h", BASE_MS).unwrap();
    let mut j = job("digest", every, Missed::RunOnce, BASE_MS);
    let to = j.target.clone().unwrap();
    assert_eq!(
        turn_of(&j, to.clone(), BASE_MS, BASE_MS).session_key,
        "agent:main:telegram:direct:42"
    );
    j.isolated = true;
    let turn = turn_of(&j, to.clone(), BASE_MS, BASE_MS);
    assert_eq!(turn.session_key, "agent:main:cron:digest");
    assert_eq!(turn.inbound.conversation, to);
}

#[test]
fn the_agent_may_not_schedule_intervals_under_a_minute() {
    let new = |every: &str, origin| jobs::NewJob {
        id: None,
        cron: None,
        tz: None,
        at: None,
        every: Some(every.into()),
        message: "tick".into(),
        missed: Missed::RunOnce,
        session_key: "agent:main:telegram:direct:42".into(),
        isolated: false,
        target: None,
        origin,
    };
    let refused = jobs::build(new("30s", CronOrigin::Agent), BASE_MS).unwrap_err();
    assert!(
        refused.to_string().contains("at least a minute"),
        "{refused}"
    );
    assert!(jobs::build(new("1m", CronOrigin::Agent), BASE_MS).is_ok());
    assert!(jobs::build(new("30s", CronOrigin::Operator), BASE_MS).is_ok());
}
