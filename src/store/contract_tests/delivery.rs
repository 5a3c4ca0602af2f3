//! [`DeliveryStore`](crate::store::DeliveryStore): the outbox, dead letters, the reply journal.

use super::{Harness, chat};

/// Finals are kept, oldest first, until delivered; attempts are counted; records are durable.
pub(crate) async fn outbox_keeps_finals_in_order_until_delivered(h: &dyn Harness) {
    let store = h.fresh();
    let a = store
        .record_final("s", &chat("1"), "one", 10)
        .await
        .unwrap();
    let b = store
        .settle_turn(
            &crate::domain::run::RunRecord::for_test("run-2", "s", &[]),
            true,
            &chat("2"),
            "two",
        )
        .await
        .unwrap();
    let c = store
        .record_final("t", &chat("3"), "three", 30)
        .await
        .unwrap();
    assert!(a < b && b < c, "ids increase: {a} {b} {c}");

    let store = h.reopen(store);
    let texts: Vec<String> = store
        .undelivered()
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(store.outbox_len(), 3);
    let first = &store.undelivered().unwrap()[0];
    assert_eq!(
        (first.id, first.created_ms, first.run_id.as_deref()),
        (a, 10, None)
    );

    assert_eq!(store.note_attempt(b).unwrap(), Some(1));
    assert_eq!(store.note_attempt(b).unwrap(), Some(2));
    assert_eq!(store.note_attempt(c + 1000).unwrap(), None);
    assert!(store.mark_delivered(b).unwrap());
    assert!(!store.mark_delivered(b).unwrap());
    assert_eq!(
        store.note_attempt(b).unwrap(),
        None,
        "a delivered final is gone"
    );
    store.flush().await.unwrap();

    let store = h.reopen(store);
    let left: Vec<u64> = store.undelivered().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(left, [a, c]);
    assert_eq!(store.outbox_len(), 2);
    assert_eq!(
        store.prune_delivered(u64::MAX).unwrap(),
        0,
        "nothing delivered is kept"
    );
}

/// `dead_letter` moves a final out of the outbox once, atomically.
pub(crate) async fn dead_letters_leave_the_outbox(h: &dyn Harness) {
    let store = h.fresh();
    let a = store
        .record_final("s", &chat("1"), "one", 10)
        .await
        .unwrap();
    let b = store
        .record_final("s", &chat("1"), "two", 20)
        .await
        .unwrap();
    store.note_attempt(a).unwrap();
    assert!(store.dead_letter(a).unwrap());
    assert!(!store.dead_letter(a).unwrap());
    store.flush().await.unwrap();
    let store = h.reopen(store);
    let dead = store.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id, dead[0].text.as_str(), dead[0].attempts),
        (a, "one", 1)
    );
    let left: Vec<u64> = store.undelivered().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(left, [b]);
    assert!(
        !store.mark_delivered(a).unwrap(),
        "a dead letter is not in the outbox"
    );
}

/// A dead letter is sent again (back in the outbox, fresh attempts and time to live) or
/// dropped, each once and durably.
pub(crate) async fn dead_letters_are_revived_or_dropped_once(h: &dyn Harness) {
    let store = h.fresh();
    let mut ids = Vec::new();
    for text in ["one", "two"] {
        let id = store.record_final("s", &chat("1"), text, 10).await.unwrap();
        store.note_attempt(id).unwrap();
        assert!(store.dead_letter(id).unwrap());
        ids.push(id);
    }
    let (a, b) = (ids[0], ids[1]);
    let (first, second) = tokio::join!(
        store.revive_dead_letter(a, 500),
        store.revive_dead_letter(a, 500)
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(first.is_some() ^ second.is_some(), "revived once");
    let revived = first.or(second).unwrap();
    assert_eq!(
        (
            revived.id,
            revived.text.as_str(),
            revived.attempts,
            revived.created_ms
        ),
        (a, "one", 0, 500)
    );
    assert!(store.drop_dead_letter(b).await.unwrap());
    assert!(!store.drop_dead_letter(b).await.unwrap());
    assert!(
        !store.drop_dead_letter(a).await.unwrap(),
        "a is in the outbox now"
    );
    let store = h.reopen(store);
    assert_eq!(store.dead_letters().unwrap(), []);
    assert_eq!(store.undelivered().unwrap(), [revived]);
    assert_eq!(store.revive_dead_letter(b, 600).await.unwrap(), None);
}

/// The reply journal keeps each message id once, in order, per run; durable when asked.
pub(crate) async fn reply_journal_notes_each_message_once(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.journal("run-1").unwrap(), None);
    store
        .journal_sent("run-1", &chat("1"), "m1", true)
        .await
        .unwrap();
    store
        .journal_sent("run-1", &chat("1"), "m2", false)
        .await
        .unwrap();
    store
        .journal_sent("run-1", &chat("1"), "m1", true)
        .await
        .unwrap();
    store
        .journal_sent("run-2", &chat("2"), "x", true)
        .await
        .unwrap();

    let store = h.reopen(store);
    let journal = store.journal("run-1").unwrap().unwrap();
    assert_eq!(journal.conversation, chat("1"));
    assert_eq!(journal.messages, ["m1", "m2"]);
    let runs: Vec<String> = store
        .all_journals()
        .unwrap()
        .into_iter()
        .map(|j| j.0)
        .collect();
    assert_eq!(runs, ["run-1", "run-2"]);
    store.forget_journal("run-1").unwrap();
    store.forget_journal("run-9").unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.journal("run-1").unwrap(), None);
    assert_eq!(store.all_journals().unwrap().len(), 1);
}
