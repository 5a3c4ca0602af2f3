//! Intakes only one process may run at a time (Telegram long polling: a second poller gets
//! 409 Conflict; a Discord shard: every connection gets every message) run, on a cluster, on
//! the node holding the channel's intake lease, and move to another node when it dies.
//!
//! [`run_leased`] waits until this node holds the lease `intake:<channel>`, runs the
//! channel's intake under a token of its own, renews the lease every tick (a fifth of the
//! lease) and stops the intake when the lease is lost: another node took it, or this node
//! could not renew it for the time it trusts a lease (the lease less a tick), before it can
//! expire in the database. It then waits for the lease again. A graceful stop gives it
//! back at once. Sending needs no lease: every node sends the replies of the sessions it
//! owns. What the intake's old holder had read but not yet acknowledged is read again by
//! the new one (from the store's cursor) and dropped as a duplicate.

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, ChannelError, InboundSink};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Coordinator;

/// The lease name of `channel`'s intake.
pub fn lease_name(channel: &str) -> String {
    format!("intake:{channel}")
}

/// Whether channel `name`'s intake runs on one node of the cluster at a time, under a
/// lease (see [`crate::config::ChannelsConfig::exclusive_intake`]): only `on_cluster`, and not a Telegram webhook.
pub fn is_exclusive(config: &crate::config::Config, on_cluster: bool, name: &str) -> bool {
    on_cluster && config.channels.exclusive_intake(name)
}

/// Whether intake leases `held` (as the store lists a node's: `intake:telegram`,
/// `intake:discord#1/2`) include one of channel `channel`'s intake (or of a part of it).
/// Only intake lease names count: a name without the `intake:` prefix is none.
pub fn runs_here(channel: &str, held: &[String]) -> bool {
    held.iter().any(|lease| {
        lease
            .strip_prefix("intake:")
            .is_some_and(|name| name.split('#').next() == Some(channel))
    })
}

/// Runs `channel`'s intake while this node holds its lease, until `stop` fires.
pub async fn run_leased(
    channel: Arc<dyn Channel>,
    sink: Arc<dyn InboundSink>,
    stop: CancellationToken,
    coordinator: Arc<dyn Coordinator>,
    lease: Duration,
) -> Result<(), ChannelError> {
    let name = lease_name(channel.name());
    loop {
        let Some(won_at) = wait_for_lease(coordinator.as_ref(), &name, lease, &stop).await else {
            return Ok(());
        };
        tracing::info!(
            channel = channel.name(),
            "cluster: this node now runs the intake"
        );
        let held = stop.child_token();
        let keeper = tokio::spawn(keep_lease(
            coordinator.clone(),
            name.clone(),
            lease,
            won_at,
            held.clone(),
        ));
        let result = channel.run(sink.clone(), held.clone()).await;
        keeper.abort();
        if stop.is_cancelled() || !held.is_cancelled() {
            // Stopping, or the intake ended by itself: give the lease to another node.
            if let Err(e) = coordinator.release_intake(&name).await {
                tracing::debug!(error = %e, "cluster: cannot give the intake lease back");
            }
            return result;
        }
        tracing::warn!(
            channel = channel.name(),
            "cluster: the intake lease was lost; this node stops the intake until it holds it again"
        );
    }
}

/// Asks for the lease every tick until this node holds it (then returns when the winning
/// request was sent: the lease runs from then on) or `stop` fires (`None`).
async fn wait_for_lease(
    coordinator: &dyn Coordinator,
    name: &str,
    lease: Duration,
    stop: &CancellationToken,
) -> Option<Instant> {
    let tick = lease / 5;
    loop {
        let asked = Instant::now();
        let ask = tokio::time::timeout(tick, coordinator.hold_intake(name, lease_secs(lease)));
        tokio::select! {
            _ = stop.cancelled() => return None,
            answer = ask => match answer {
                Ok(Ok(true)) => return Some(asked),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "cluster: cannot ask for the intake lease"),
                Err(_) => tracing::debug!("cluster: asking for the intake lease timed out"),
            },
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(pause(coordinator, tick)) => {}
        }
    }
}

/// How long to wait before asking for a lease again: a tick, or less while a dead node's
/// leases are about to become free ([`Coordinator::dying`]).
pub(super) fn pause(coordinator: &dyn Coordinator, tick: Duration) -> Duration {
    match coordinator.dying() {
        true => tick.min(Duration::from_millis(300)),
        false => tick,
    }
}

/// Renews the lease every tick; cancels `held` when another node holds it or when it could
/// not be renewed for as long as a lease is trusted (the lease less a tick, counted from
/// when the request that won or renewed it was sent, `won_at` at first).
async fn keep_lease(
    coordinator: Arc<dyn Coordinator>,
    name: String,
    lease: Duration,
    won_at: Instant,
    held: CancellationToken,
) {
    let tick = lease / 5;
    let mut trusted_until = won_at + lease - tick;
    let mut again = false;
    loop {
        if !again {
            tokio::select! {
                _ = held.cancelled() => return,
                _ = tokio::time::sleep(tick) => {}
                // This node's lock may have been lost: renew now (connecting again), before
                // the others may take the lease (a second after the lock went).
                _ = coordinator.lock_lost() => {
                    trusted_until = trusted_until.min(Instant::now() + Duration::from_millis(500));
                }
            }
        }
        let asked = Instant::now();
        let epoch = coordinator.lock_epoch();
        let renewed = tokio::time::timeout(tick, coordinator.hold_intake(&name, lease_secs(lease)));
        let renewed = renewed.await;
        // The lock's connection ended meanwhile (the wake-up above only counts while it is
        // awaited): whatever the answer, renew again at once.
        again = coordinator.lock_epoch() != epoch;
        if again {
            // The others may take the lease a second after the lock went: trusted for half
            // of that unless renewed meanwhile.
            trusted_until = trusted_until.min(Instant::now() + Duration::from_millis(500));
        }
        match renewed {
            Ok(Ok(true)) if !again => trusted_until = asked + lease - tick,
            Ok(Ok(false)) => break,
            _ if Instant::now() >= trusted_until => {
                tracing::warn!("cluster: the intake lease could not be renewed in time");
                break;
            }
            _ => tracing::debug!("cluster: cannot renew the intake lease yet"),
        }
    }
    held.cancel();
}

/// The lease in whole seconds (at least one), as the store takes it.
fn lease_secs(lease: Duration) -> u64 {
    lease.as_secs_f64().ceil().max(1.0) as u64
}

#[cfg(test)]
#[path = "intake_lease_tests.rs"]
mod tests;
