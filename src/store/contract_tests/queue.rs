//! [`QueueStore`](crate::store::QueueStore): pending turns, dedupe, the exactly-once steps.

use super::{Harness, chat, turn};

/// `enqueue_unique` queues once per key, durably; seqs increase, also after a restart.
pub(crate) async fn enqueue_unique_is_durable_and_drops_duplicates(h: &dyn Harness) {
    let store = h.fresh();
    let a = store.enqueue_unique("k1", &turn("s1", "1")).await.unwrap();
    let a = a.expect("a new key is queued");
    assert_eq!(
        store.enqueue_unique("k1", &turn("s1", "1")).await.unwrap(),
        None
    );
    let b = store.enqueue_unique("k2", &turn("s2", "2")).await.unwrap();
    let b = b.expect("another key is queued");
    let c = store.enqueue(&turn("s1", "3")).await.unwrap();
    assert!(a < b && b < c, "seqs increase: {a} {b} {c}");

    let store = h.reopen(store);
    let all = store.all_pending().unwrap();
    assert_eq!(
        all,
        vec![
            (a, turn_at(&all, 0)),
            (b, turn_at(&all, 1)),
            (c, turn_at(&all, 2))
        ]
    );
    assert_eq!(all[0].1.inbound.message_id, "1");
    assert_eq!(all[1].1.session_key, "s2");
    let for_s1: Vec<u64> = store
        .pending_for("s1")
        .unwrap()
        .iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(for_s1, [a, c]);
    assert_eq!(
        store.enqueue_unique("k1", &turn("s1", "1")).await.unwrap(),
        None,
        "the dedupe mark survives a restart"
    );
    let d = store.enqueue(&turn("s1", "4")).await.unwrap();
    assert!(d > c, "seqs keep increasing after a restart");
}

fn turn_at(all: &[(u64, crate::store::PendingTurn)], i: usize) -> crate::store::PendingTurn {
    all[i].1.clone()
}

/// Of many concurrent `enqueue_unique` calls with one key, exactly one queues.
pub(crate) async fn concurrent_enqueue_unique_admits_exactly_one(h: &dyn Harness) {
    let store = h.fresh();
    let queued = super::race(8, |i| {
        let store = store.clone();
        async move {
            let turn = turn("s", &i.to_string());
            store.enqueue_unique("same", &turn).await.unwrap()
        }
    })
    .await;
    assert_eq!(queued.iter().filter(|seq| seq.is_some()).count(), 1);
    assert_eq!(store.all_pending().unwrap().len(), 1);
}

/// `remove_pending` says whether the turn was there; `clear_pending` removes durably.
pub(crate) async fn pending_turns_are_removed_and_cleared(h: &dyn Harness) {
    let store = h.fresh();
    let a = store.enqueue(&turn("s", "1")).await.unwrap();
    let b = store.enqueue(&turn("s", "2")).await.unwrap();
    let c = store.enqueue(&turn("s", "3")).await.unwrap();
    assert_eq!(store.pending_count().unwrap(), 3);
    assert!(store.is_pending(a).unwrap());
    assert!(store.remove_pending(a).unwrap());
    assert_eq!(store.pending_count().unwrap(), 2);
    assert!(!store.remove_pending(a).unwrap());
    assert!(!store.is_pending(a).unwrap());
    store.clear_pending(&[b, c]).await.unwrap();
    let store = h.reopen(store);
    assert!(store.all_pending().unwrap().is_empty());
    assert_eq!(store.pending_count().unwrap(), 0);
    assert!(!store.is_pending(b).unwrap());
}

/// `settle_turn` records the final and removes the turn's pending entries together, durably.
pub(crate) async fn settle_turn_records_the_final_and_clears_pending_together(h: &dyn Harness) {
    let store = h.fresh();
    let own = store.enqueue_unique("k1", &turn("s", "1")).await.unwrap();
    let steered = store.enqueue_unique("k2", &turn("s", "2")).await.unwrap();
    let other = store.enqueue(&turn("t", "3")).await.unwrap();
    let seqs = [own.unwrap(), steered.unwrap()];
    let id = store
        .settle_turn(
            &crate::domain::run::RunRecord::for_test("run-1", "s", &seqs),
            true,
            &chat("42"),
            "the answer",
        )
        .await
        .unwrap();

    let store = h.reopen(store);
    let pending: Vec<u64> = store.all_pending().unwrap().iter().map(|p| p.0).collect();
    assert_eq!(pending, [other], "only the other session's turn is left");
    let outbox = store.undelivered().unwrap();
    assert_eq!(outbox.len(), 1);
    let entry = &outbox[0];
    assert_eq!(entry.id, id);
    assert_eq!(entry.run_id.as_deref(), Some("run-1"));
    assert_eq!(entry.session_key, "s");
    assert_eq!(entry.conversation, chat("42"));
    assert_eq!(entry.text, "the answer");
    assert_eq!((entry.attempts, entry.delivered), (0, false));
    for seq in seqs {
        let record = store.finished_run(seq).unwrap().expect("the run's record");
        assert_eq!(
            (record.run_id.as_str(), record.seqs.as_slice()),
            ("run-1", &seqs[..])
        );
    }
    assert_eq!(store.finished_run(other).unwrap(), None);
}

/// `finish_run` clears a run's pending turns and keeps its record, durably; old records are
/// pruned by their end.
pub(crate) async fn finish_run_keeps_the_record_until_pruned(h: &dyn Harness) {
    let store = h.fresh();
    let seq = store.enqueue(&turn("s", "1")).await.unwrap();
    let record = crate::domain::run::RunRecord {
        ended_ms: 1_000,
        ..crate::domain::run::RunRecord::for_test("run-1", "s", &[seq])
    };
    store.finish_run(&record, true).await.unwrap();
    let store = h.reopen(store);
    assert!(!store.is_pending(seq).unwrap());
    assert_eq!(store.finished_run(seq).unwrap(), Some(record));
    // A record kept ahead of its turns' own removal leaves the queue alone.
    let other = store.enqueue(&turn("s", "2")).await.unwrap();
    let kept = crate::domain::run::RunRecord {
        ended_ms: 5_000,
        ..crate::domain::run::RunRecord::for_test("run-2", "s", &[other])
    };
    store.keep_run_record(&kept).unwrap();
    assert!(store.is_pending(other).unwrap());
    assert_eq!(store.finished_run(other).unwrap(), Some(kept));
    assert_eq!(
        store.prune_finished(1_000).unwrap(),
        0,
        "not older than the cut"
    );
    assert_eq!(store.prune_finished(1_001).unwrap(), 1);
    assert_eq!(store.finished_run(seq).unwrap(), None);
}

/// A blank final (NO_REPLY, a silent stop) clears pending but leaves no outbox record.
pub(crate) async fn settling_a_blank_final_records_nothing(h: &dyn Harness) {
    let store = h.fresh();
    let seq = store.enqueue(&turn("s", "1")).await.unwrap();
    let first = store
        .settle_turn(
            &crate::domain::run::RunRecord::for_test("run-1", "s", &[seq]),
            true,
            &chat("42"),
            "  \n",
        )
        .await
        .unwrap();
    let second = store
        .settle_turn(
            &crate::domain::run::RunRecord::for_test("run-2", "s", &[]),
            true,
            &chat("42"),
            "",
        )
        .await
        .unwrap();
    assert!(second > first, "ids are still handed out and increase");
    assert!(store.all_pending().unwrap().is_empty());
    assert!(store.undelivered().unwrap().is_empty());
    assert_eq!(store.outbox_len(), 0);
}

/// `mark_seen` is atomic per key; `prune_seen` forgets only marks older than the cut.
pub(crate) async fn dedupe_marks_are_atomic_and_prune_only_old_ones(h: &dyn Harness) {
    let store = h.fresh();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::task::spawn_blocking(move || {
            store.mark_seen("k", 1_000).unwrap()
        }));
    }
    let mut fresh = 0;
    for task in tasks {
        fresh += usize::from(task.await.unwrap());
    }
    assert_eq!(fresh, 1);
    assert!(store.mark_seen("new", 3_000).unwrap());
    assert_eq!(store.prune_seen(2_000).unwrap(), 1);
    assert!(
        store.mark_seen("k", 4_000).unwrap(),
        "a pruned key is new again"
    );
    assert!(
        !store.mark_seen("new", 4_000).unwrap(),
        "a newer mark is kept"
    );
    // `enqueue_unique` and `mark_seen` share the marks.
    assert_eq!(
        store.enqueue_unique("new", &turn("s", "1")).await.unwrap(),
        None
    );
    // A forgotten mark is new again; forgetting one that is not there says so.
    assert!(store.forget_seen("new").unwrap());
    assert!(!store.forget_seen("new").unwrap());
    assert!(store.mark_seen("new", 5_000).unwrap());
    assert!(!store.mark_seen("k", 5_000).unwrap(), "other marks stay");
}

/// `enqueue_unique_buffered` queues and drops duplicates at once, like `enqueue_unique`,
/// and the durable write after it (a cursor save) keeps it across a restart.
pub(crate) async fn buffered_enqueue_is_seen_at_once_and_kept_with_the_cursor(h: &dyn Harness) {
    let store = h.fresh();
    let a = store.enqueue_unique_buffered("k1", &turn("s1", "1")).await;
    let a = a.unwrap().expect("a new key is queued");
    let again = store.enqueue_unique_buffered("k1", &turn("s1", "1")).await;
    assert_eq!(again.unwrap(), None);
    assert_eq!(
        store.enqueue_unique("k1", &turn("s1", "1")).await.unwrap(),
        None
    );
    let seqs = |store: &crate::store::Store| -> Vec<u64> {
        store.all_pending().unwrap().iter().map(|p| p.0).collect()
    };
    assert_eq!(seqs(&store), [a]);
    store
        .set_cursor("telegram:default:offset", 5)
        .await
        .unwrap();

    let store = h.reopen(store);
    assert_eq!(seqs(&store), [a]);
    let cursor = store.get_cursor("telegram:default:offset").unwrap();
    assert_eq!(cursor, Some(5));
    assert_eq!(
        store.enqueue_unique("k1", &turn("s1", "1")).await.unwrap(),
        None
    );
}
