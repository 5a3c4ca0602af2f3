//! Recovery of replies at start (or when a cluster node takes partitions over): the finals a
//! previous process recorded but did not deliver go to the outbox worker, and what a reply
//! cut short had put in the chat is taken back when its turn will run again.

use std::collections::{HashMap, HashSet};

use super::{Delivery, Notices, journal};
use crate::domain::run::seq_of_run_id;
use crate::store::{PendingTurn, ReplyJournal, Store, partition_of};

/// Hands the undelivered finals to the outbox worker and takes back the cut-short replies
/// of the turns that will run again; returns those pending turns, oldest first. With
/// `only`, of the sessions in those partitions alone (a cluster node taking partitions
/// over), and journals of other runs are left alone.
pub fn recover_replies(
    store: &Store,
    notices: &Notices,
    only: Option<&HashSet<u32>>,
) -> Vec<(u64, PendingTurn)> {
    let mine = |key: &str| only.is_none_or(|parts| parts.contains(&partition_of(key)));
    let mut journals: HashMap<String, ReplyJournal> = match store.all_journals() {
        Ok(all) => all.into_iter().collect(),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the reply journal");
            HashMap::new()
        }
    };
    match store.undelivered() {
        Ok(entries) => {
            for entry in entries.into_iter().filter(|e| mine(&e.session_key)) {
                let journal = entry.run_id.as_ref().and_then(|run| journals.remove(run));
                // A `message`-tool record's progress is read by its delivery, never taken back.
                journals.remove(&super::outbox::files_journal(entry.id));
                // Parts of this final (or its previews) may be in the chat already: the worker
                // takes them back, then sends the whole final once, journaled again, so a
                // crash during this resend is taken back at the next start too. One older
                // than the TTL is dead-lettered by the worker.
                tracing::debug!(id = entry.id, session = %entry.session_key, "recovered an undelivered final");
                notices.outbox().submit(Delivery::recorded(entry, journal));
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot read the outbox"),
    }
    let mut pending = match store.all_pending() {
        Ok(pending) => pending,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the pending queue");
            Vec::new()
        }
    };
    pending.retain(|(_, turn)| mine(&turn.session_key));
    let still_pending: HashSet<u64> = pending.iter().map(|(seq, _)| *seq).collect();
    let mut to_take_back = Vec::new();
    for (run, journal) in journals {
        // A turn that will run again: its cut-short reply goes. Any other run's reply was
        // delivered (only the journal's removal was lost) and stays.
        if seq_of_run_id(&run).is_some_and(|seq| still_pending.contains(&seq)) {
            to_take_back.push((run, journal));
        } else if only.is_none() {
            journal::forget(store, &run);
        }
    }
    // Taken back in the background: channels connect (and take new messages) meanwhile.
    // The turn may run again before; what its new reply notes in the journal stays there.
    if !to_take_back.is_empty() {
        let (store, notices) = (store.clone(), notices.clone());
        tokio::spawn(async move {
            for (run, journal) in to_take_back {
                let channel = notices.channel(&journal.conversation.channel);
                journal::take_back(&store, channel, &run, &journal).await;
            }
        });
    }
    pending
}
