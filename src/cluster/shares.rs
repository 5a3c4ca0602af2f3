//! A node's share of the partitions: each tick's heartbeat and renewal, the partitions taken
//! up to the share or given back over it, and every lease given back when the node leaves.

use std::collections::HashSet;

use tokio::time::Instant;

use super::Cluster;
use crate::store::{PARTITIONS, Store, partition_of};

/// The node's share of the partitions when `alive` nodes are.
pub fn share(alive: usize) -> usize {
    let alive = alive.max(1);
    (PARTITIONS as usize).div_ceil(alive)
}

/// A tick's leases: heartbeat, renewal, then the share taken, or what is over it
/// given back; once paused by [`Cluster::check_protocols`] for a full lease, everything
/// held is given back (as far as nothing of it runs or waits for delivery here) so the
/// other nodes run those sessions, and the share is taken again when the pause ends. The
/// share counts the live nodes of this node's protocol only. Returns the partitions new
/// to this node, sorted.
pub async fn keep_share(store: &Store, cluster: &Cluster) -> Vec<u32> {
    let lease_s = cluster.lease.as_secs();
    let runs = cluster.runs();
    cluster.set_beat_ok(false);
    let alive = match cluster.coordinator.heartbeat(lease_s, &runs).await {
        Ok(alive) => alive,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: heartbeat failed; this node's leases run out unless it returns");
            return Vec::new();
        }
    };
    // The lock's epoch before the renewal: a renewal answered over a connection that
    // ended meanwhile is not trusted.
    let epoch = cluster.coordinator.lock_epoch();
    let asked = Instant::now();
    let mut fresh = match cluster.coordinator.renew(lease_s).await {
        Ok(renewed) => cluster.renewed_under(&renewed, asked, epoch),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot renew the leases");
            return Vec::new();
        }
    };
    cluster.set_beat_ok(true);
    let held = cluster.held().len();
    let paused = cluster.check_protocols().await;
    // A node of another protocol takes no partition from this one: it does not count.
    let share = share(alive.saturating_sub(cluster.foreign_live()));
    if paused {
        // Nothing new is taken while a node of another protocol lives, and what is held
        // goes back once that lasted a full lease.
        if held > 0 && cluster.paused_for_a_lease() {
            give_back(store, cluster, held).await;
            fresh.retain(|p| cluster.held().contains(p));
        }
    } else if held < share {
        let (asked, epoch) = (Instant::now(), cluster.coordinator.lock_epoch());
        match cluster.coordinator.acquire(share - held, lease_s).await {
            Ok(taken) if !taken.is_empty() => {
                fresh.extend(cluster.took_under(&taken, asked, epoch));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cluster: cannot take partitions"),
        }
    } else if held > share {
        give_back(store, cluster, held - share).await;
    }
    fresh.sort_unstable();
    if !fresh.is_empty() {
        tracing::info!(node = cluster.node(), partitions = ?fresh, alive, "cluster: partitions taken over");
    }
    fresh
}

/// Gives back up to `excess` held partitions with nothing running, queued or undelivered
/// here: each is no longer held here first (so nothing new starts), then checked, then
/// released.
async fn give_back(store: &Store, cluster: &Cluster, mut excess: usize) {
    let undelivered: HashSet<u32> = match store.undelivered() {
        Ok(entries) => entries
            .iter()
            .map(|e| partition_of(&e.session_key))
            .collect(),
        Err(_) => return,
    };
    for partition in cluster.held() {
        if undelivered.contains(&partition) {
            continue;
        }
        let Some(held) = cluster
            .state
            .lock()
            .ok()
            .and_then(|mut s| s.held.remove(&partition))
        else {
            continue;
        };
        let busy = cluster
            .submitted_in(partition)
            .into_iter()
            .any(|seq| store.is_pending(seq).unwrap_or(true));
        let delivering = store.undelivered().map_or(true, |entries| {
            entries
                .iter()
                .any(|e| partition_of(&e.session_key) == partition)
        });
        if busy || delivering {
            if let Ok(mut s) = cluster.state.lock() {
                s.held.insert(partition, held);
            }
            continue;
        }
        match cluster.coordinator.release(&[partition]).await {
            Ok(()) => tracing::info!(
                partition,
                "cluster: partition given back (over this node's share, or paused)"
            ),
            Err(e) => {
                tracing::warn!(error = %e, partition, "cluster: cannot give a partition back; it expires")
            }
        }
        excess -= 1;
        if excess == 0 {
            return;
        }
    }
}

/// Gives every lease back at shutdown (after the lanes stopped and the outbox had its
/// chance), so the other nodes take the sessions over at once.
pub async fn leave(cluster: &Cluster) {
    if let Ok(mut s) = cluster.state.lock() {
        s.held.clear();
    }
    match cluster.coordinator.leave().await {
        Ok(()) => tracing::info!(
            node = cluster.node(),
            "cluster: left; partitions given back"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot give the partitions back; they expire")
        }
    }
}

#[cfg(test)]
#[path = "shares_tests.rs"]
mod tests;
