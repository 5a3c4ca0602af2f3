//! A final whose recording failed without a clear answer: on PostgreSQL the connection can
//! drop while `COMMIT` runs, and the store cannot tell whether the transaction committed.
//! Before, the turn then waited for the next start (its recovery resends an undelivered
//! final, or runs a pending turn again). Now it is looked at again once the store answers:
//! the store's calls wait while it reconnects, so the first read after the failure comes
//! once the database is back. Still pending: nothing was recorded, and the final is
//! recorded now. Settled: the commit went through, and the final's outbox entry is found
//! (by its run id) and delivered.

use crate::domain::run::RunRecord;
use crate::store::{Store, StoreError};
use chela_channel::Conversation;

/// What looking at a failed settle again found.
#[derive(Debug)]
pub enum Settled {
    /// The final is recorded (now, or it was already): its outbox id, to deliver.
    Recorded(u64),
    /// It was recorded and there is nothing to deliver (a blank final, or delivered).
    Nothing,
    /// This node no longer holds the session's lease: the holder runs the turn again.
    Fenced,
    /// It could not be told or done: it waits for the next start, as before.
    Unknown(StoreError),
}

/// A final as `settle_turn` takes it.
#[derive(Clone, Copy)]
pub struct Final<'a> {
    /// The run.
    pub record: &'a RunRecord,
    /// Whether its record is kept.
    pub keep_record: bool,
    /// Where the final goes.
    pub to: &'a Conversation,
    /// Its text.
    pub text: &'a str,
}

/// Looks at `done`'s turns again after its `settle_turn` failed with `error`; see the
/// module's doc.
pub async fn settle_again(store: &Store, error: &StoreError, done: &Final<'_>) -> Settled {
    let Final {
        record,
        keep_record,
        to,
        text,
    } = *done;
    if matches!(error, StoreError::NotOwner { .. }) {
        // The lease is gone: another node runs the session now; nothing to recheck here.
        return Settled::Fenced;
    }
    let Some(first) = record.seqs.first() else {
        return Settled::Nothing;
    };
    match store.is_pending(*first) {
        Ok(true) => match store.settle_turn(record, keep_record, to, text).await {
            Ok(id) => Settled::Recorded(id),
            // Answered by another run meanwhile: its final goes out from there.
            Err(StoreError::AlreadySettled { .. }) => Settled::Nothing,
            Err(e) => Settled::Unknown(e),
        },
        Ok(false) => match store.undelivered() {
            Ok(entries) => entries
                .iter()
                .find(|e| e.run_id.as_deref() == Some(record.run_id.as_str()))
                .map_or(Settled::Nothing, |e| Settled::Recorded(e.id)),
            Err(e) => Settled::Unknown(e),
        },
        Err(e) => Settled::Unknown(e),
    }
}

/// [`settle_again`] after `settle_turn` failed with `error`, logged: the outbox id of the
/// final to deliver, if there is one.
pub async fn recorded_after(store: &Store, error: &StoreError, done: &Final<'_>) -> Option<u64> {
    tracing::error!(error = %error, "cannot record the final reply; looking again once the store answers");
    match settle_again(store, error, done).await {
        Settled::Recorded(id) => Some(id),
        Settled::Nothing | Settled::Fenced => None,
        Settled::Unknown(e) => {
            tracing::error!(error = %e, "cannot record the final reply; it is looked at again at the next start");
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::contract_tests::{chat, turn};

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("data")).unwrap();
        (dir, store)
    }

    fn final_of<'a>(record: &'a RunRecord, text: &'a str) -> Final<'a> {
        static TO: std::sync::LazyLock<Conversation> = std::sync::LazyLock::new(|| chat("42"));
        Final {
            record,
            keep_record: false,
            to: &TO,
            text,
        }
    }

    fn lost() -> StoreError {
        StoreError::Db("connection closed".into())
    }

    #[tokio::test]
    async fn a_final_not_recorded_is_recorded_once_the_store_answers() {
        let (_dir, store) = store();
        let seq = store.enqueue(&turn("s", "1")).await.unwrap();
        let record = RunRecord::for_test("run-1", "s", &[seq]);
        let settled = settle_again(&store, &lost(), &final_of(&record, "hi")).await;
        let Settled::Recorded(id) = settled else {
            panic!("{settled:?}");
        };
        assert!(!store.is_pending(seq).unwrap());
        let undelivered = store.undelivered().unwrap();
        assert_eq!(undelivered.len(), 1);
        assert_eq!(
            (undelivered[0].id, undelivered[0].text.as_str()),
            (id, "hi")
        );
    }

    #[tokio::test]
    async fn a_final_whose_commit_went_through_is_found_and_not_recorded_twice() {
        let (_dir, store) = store();
        let seq = store.enqueue(&turn("s", "1")).await.unwrap();
        let record = RunRecord::for_test("run-1", "s", &[seq]);
        // The commit happened; only its answer was lost.
        let id = store
            .settle_turn(&record, false, &chat("42"), "hi")
            .await
            .unwrap();
        let settled = settle_again(&store, &lost(), &final_of(&record, "hi")).await;
        assert!(
            matches!(settled, Settled::Recorded(found) if found == id),
            "{settled:?}"
        );
        assert_eq!(store.undelivered().unwrap().len(), 1, "recorded once");
        // A blank final has no outbox entry: nothing to deliver.
        let seq = store.enqueue(&turn("s", "2")).await.unwrap();
        let blank = RunRecord::for_test("run-2", "s", &[seq]);
        store
            .settle_turn(&blank, false, &chat("42"), "")
            .await
            .unwrap();
        let settled = settle_again(&store, &lost(), &final_of(&blank, "")).await;
        assert!(matches!(settled, Settled::Nothing), "{settled:?}");
    }

    #[tokio::test]
    async fn a_lost_lease_is_not_rechecked() {
        let (_dir, store) = store();
        let seq = store.enqueue(&turn("s", "1")).await.unwrap();
        let record = RunRecord::for_test("run-1", "s", &[seq]);
        let fenced = StoreError::NotOwner {
            session: "s".into(),
            partition: 1,
        };
        let settled = settle_again(&store, &fenced, &final_of(&record, "hi")).await;
        assert!(matches!(settled, Settled::Fenced), "{settled:?}");
        assert!(store.is_pending(seq).unwrap(), "left to the lease's holder");
    }
}
