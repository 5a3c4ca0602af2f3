//! [`CronStore`](crate::store::CronStore).

use super::{Harness, chat};
use crate::domain::schedule::{Missed, Schedule};
use crate::store::{CronJob, CronOrigin};

/// A job `id` due at `next_ms`.
pub(crate) fn job(id: &str, next_ms: u64) -> CronJob {
    CronJob {
        id: id.into(),
        schedule: Schedule::Every {
            every_ms: 60_000,
            anchor_ms: 0,
        },
        session_key: "agent:main:telegram:direct:42".into(),
        isolated: false,
        target: Some(chat("42")),
        message: format!("run {id}"),
        missed: Missed::RunOnce,
        origin: CronOrigin::Agent,
        created_ms: 1,
        next_ms: Some(next_ms),
        last_ms: None,
        active_hours: None,
    }
}

/// Jobs are kept durably, listed by id, replaced and removed.
pub(crate) async fn cron_jobs_round_trip_durably(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.cron_job("b").unwrap(), None);
    store.put_cron(&job("b", 10)).await.unwrap();
    store.put_cron(&job("a", 20)).await.unwrap();
    let mut b = job("b", 30);
    b.schedule = Schedule::cron("30 14 * * 3", Some("Europe/Berlin")).unwrap();
    b.target = None;
    store.put_cron(&b).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.cron_job("b").unwrap(), Some(b.clone()));
    assert_eq!(store.cron_jobs().unwrap(), [job("a", 20), b.clone()]);
    assert!(store.remove_cron("a").await.unwrap());
    assert!(!store.remove_cron("a").await.unwrap());
    let store = h.reopen(store);
    assert_eq!(store.cron_jobs().unwrap(), [b]);
}

/// A job moves past a run once: only from the run it is due at, by one of several callers,
/// durably; with no next run it goes.
pub(crate) async fn advance_cron_moves_a_job_past_a_run_once(h: &dyn Harness) {
    let store = h.fresh();
    store.put_cron(&job("j", 60_000)).await.unwrap();
    let moved = super::race(4, |_| {
        let store = store.clone();
        async move {
            let advanced = store.advance_cron("j", 60_000, Some(120_000), true);
            advanced.await.unwrap()
        }
    })
    .await;
    let movers = moved.iter().filter(|moved| **moved).count();
    assert_eq!(movers, 1, "exactly one caller moves the job");
    // A stale run (already moved past) changes nothing.
    assert!(
        !store
            .advance_cron("j", 60_000, Some(999), true)
            .await
            .unwrap()
    );
    assert!(!store.advance_cron("none", 1, Some(2), true).await.unwrap());
    let store = h.reopen(store);
    let moved = store.cron_job("j").unwrap().unwrap();
    assert_eq!(
        (moved.next_ms, moved.last_ms),
        (Some(120_000), Some(60_000))
    );
    // A skipped run moves the job without a last run.
    assert!(
        store
            .advance_cron("j", 120_000, Some(180_000), false)
            .await
            .unwrap()
    );
    let moved = store.cron_job("j").unwrap().unwrap();
    assert_eq!(
        (moved.next_ms, moved.last_ms),
        (Some(180_000), Some(60_000))
    );
    // No next run: the job is done and goes.
    assert!(store.advance_cron("j", 180_000, None, true).await.unwrap());
    let store = h.reopen(store);
    assert_eq!(store.cron_jobs().unwrap(), []);
}

/// A new job is added once: of two adds of one id, one wins and the other leaves it as is.
pub(crate) async fn add_cron_adds_an_id_once(h: &dyn Harness) {
    let store = h.fresh();
    let mut other = job("j", 99);
    other.message = "the other".into();
    let first = job("j", 10);
    let added = super::race(2, |i| {
        let (store, job) = (store.clone(), [&first, &other][i].clone());
        async move { store.add_cron(&job).await.unwrap() }
    })
    .await;
    assert!(added[0] ^ added[1], "exactly one add wins");
    let won = store.cron_job("j").unwrap().unwrap();
    assert!(won == first || won == other);
    assert!(!store.add_cron(&job("j", 10)).await.unwrap());
    let store = h.reopen(store);
    assert_eq!(store.cron_job("j").unwrap(), Some(won));
}
