//! Start-up recovery: undelivered finals go to the outbox worker (which dead-letters them past
//! their TTL), and pending turns of the previous process are handed to their lanes again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Core;
use crate::delivery::Delivery;
use crate::delivery::journal as reply_journal;
use crate::domain::message::now_ms;
use crate::domain::run::seq_of_run_id;
use crate::inbound::route::queued_turn;
use crate::store::{PendingTurn, ReplyJournal, partition_of};

/// How long inbound dedupe marks are kept (SPEC 1.4: at least 24 h).
const DEDUPE_KEEP_MS: u64 = 25 * 60 * 60 * 1000;
/// How long delivered outbox records are kept.
const DELIVERED_KEEP_MS: u64 = 60 * 60 * 1000;
/// How often old marks and records are pruned.
const HOUSEKEEPING_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Prunes old dedupe marks and delivered outbox records now and every hour, until shutdown.
pub async fn housekeeping(core: std::sync::Weak<Core>) {
    loop {
        let Some(core) = core.upgrade() else { return };
        let now = now_ms();
        if let Err(e) = core.store.prune_seen(now.saturating_sub(DEDUPE_KEEP_MS)) {
            tracing::warn!(error = %e, "cannot prune dedupe marks");
        }
        if let Err(e) = core
            .store
            .prune_delivered(now.saturating_sub(DELIVERED_KEEP_MS))
        {
            tracing::warn!(error = %e, "cannot prune delivered replies");
        }
        let keep = crate::rpc::runs::FINISHED_KEEP.as_millis() as u64;
        if let Err(e) = core.store.prune_finished(now.saturating_sub(keep)) {
            tracing::warn!(error = %e, "cannot prune the records of finished runs");
        }
        let shutdown = core.shutdown.clone();
        drop(core);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(HOUSEKEEPING_EVERY) => {}
        }
    }
}

/// Recovers what the previous process left.
pub async fn recover(core: &Arc<Core>) {
    let pending = recover_replies(core, None);
    if !pending.is_empty() {
        tracing::info!(turns = pending.len(), "resuming pending turns");
    }
    for (seq, turn) in pending {
        if let Err(e) = core
            .lanes
            .submit(&turn.session_key, queued_turn(seq, &turn))
            .await
        {
            tracing::error!(error = %e, "cannot resume a pending turn");
        }
    }
}

/// Hands the undelivered finals to the outbox worker and takes back the cut-short replies
/// of the turns that will run again; returns those pending turns, oldest first. With
/// `only`, of the sessions in those partitions alone (a cluster node taking partitions
/// over), and journals of other runs are left alone.
pub(super) fn recover_replies(
    core: &Arc<Core>,
    only: Option<&HashSet<u32>>,
) -> Vec<(u64, PendingTurn)> {
    let mine = |key: &str| only.is_none_or(|parts| parts.contains(&partition_of(key)));
    let mut journals: HashMap<String, ReplyJournal> = match core.store.all_journals() {
        Ok(all) => all.into_iter().collect(),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the reply journal");
            HashMap::new()
        }
    };
    match core.store.undelivered() {
        Ok(entries) => {
            for entry in entries.into_iter().filter(|e| mine(&e.session_key)) {
                let journal = entry.run_id.as_ref().and_then(|run| journals.remove(run));
                // A `message`-tool record's progress is read by its delivery, never taken back.
                journals.remove(&crate::delivery::outbox::files_journal(entry.id));
                // Parts of this final (or its previews) may be in the chat already: the worker
                // takes them back, then sends the whole final once, journaled again, so a
                // crash during this resend is taken back at the next start too. One older
                // than the TTL is dead-lettered by the worker.
                core.outbox.submit(Delivery::recorded(entry, journal));
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot read the outbox"),
    }
    let mut pending = match core.store.all_pending() {
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
            reply_journal::forget(&core.store, &run);
        }
    }
    // Taken back in the background: channels connect (and take new messages) meanwhile.
    // The turn may run again before; what its new reply notes in the journal stays there.
    if !to_take_back.is_empty() {
        let core = core.clone();
        tokio::spawn(async move {
            for (run, journal) in to_take_back {
                let channel = core.notices.channel(&journal.conversation.channel);
                reply_journal::take_back(&core.store, channel, &run, &journal).await;
            }
        });
    }
    pending
}

/// How often idle bindings and agent processes are checked.
const ACP_HOUSEKEEPING_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Expires idle coding-agent bindings (telling their conversations) and shuts down idle
/// agent processes, until the gateway stops.
pub async fn acp_housekeeping(core: std::sync::Weak<Core>) {
    loop {
        let Some(core) = core.upgrade() else { return };
        for binding in core.acp.housekeeping().await {
            let text = format!(
                "{} was unbound after a long idle time; /acp spawn starts a new one.",
                binding.harness
            );
            core.notices.say(&binding.conversation, &text).await;
        }
        let shutdown = core.shutdown.clone();
        drop(core);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ACP_HOUSEKEEPING_EVERY) => {}
        }
    }
}

#[cfg(test)]
#[path = "recover_tests.rs"]
mod tests;
