//! Start-up recovery and the gateway's periodic upkeep: the replies a previous process left
//! go to delivery (`recover_replies`: undelivered finals to the outbox worker, which
//! dead-letters them past their TTL), its pending turns to their lanes again; old dedupe
//! marks and records are pruned, idle coding agents unbound.

use std::sync::Arc;

use super::Core;
use crate::delivery::recover_replies;
use crate::domain::message::now_ms;
use crate::inbound::route::queued_turn;

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
    let pending = recover_replies(&core.store, &core.notices, None);
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
