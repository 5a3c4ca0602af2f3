//! The intake leases, layout adverts and heartbeats several fake nodes share, on tokio's
//! clock (paused in the tests), for a [`super::FakeCoordinator`] made with
//! [`super::FakeCoordinator::on_table`]: what PostgreSQL's `intake_leases`, `intake_layouts`
//! and `nodes` tables do for real nodes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::super::StoreError;
use super::super::cluster::NodeInfo;
use super::super::version::NodeVersion;
use super::node_info;

/// The shared tables.
#[derive(Default)]
pub struct LeaseTable {
    /// The intake leases: name, (holder, until when).
    pub leases: HashMap<String, (String, Instant)>,
    /// The last heartbeat of each node.
    pub seen: HashMap<String, Instant>,
    /// The layouts advertised (layout, node) until when.
    pub adverts: HashMap<(String, String), Instant>,
    /// Nodes whose heartbeat goes on by itself (their cluster loop lives).
    pub beating: BTreeSet<String>,
    /// The database is unreachable.
    pub down: bool,
    /// The database's calls hang.
    pub hangs: bool,
}

fn unreachable() -> StoreError {
    StoreError::Db("unreachable".into())
}

/// Waits forever while the database's calls hang.
async fn hang_if(table: &Mutex<LeaseTable>) {
    let hangs = table.lock().unwrap().hangs;
    if hangs {
        std::future::pending::<()>().await;
    }
}

/// [`super::Coordinator::hold_intake`] of node `id`.
pub async fn hold_intake(
    table: &Mutex<LeaseTable>,
    id: &str,
    name: &str,
    lease_s: u64,
) -> Result<bool, StoreError> {
    hang_if(table).await;
    let now = Instant::now();
    let mut table = table.lock().unwrap();
    if table.down {
        return Err(unreachable());
    }
    let free = match table.leases.get(name) {
        Some((holder, expires)) => holder == id || *expires <= now,
        None => true,
    };
    if free {
        let until = now + Duration::from_secs(lease_s);
        table.leases.insert(name.into(), (id.to_owned(), until));
    }
    Ok(free)
}

/// [`super::Coordinator::release_intake`] of node `id`.
pub async fn release_intake(
    table: &Mutex<LeaseTable>,
    id: &str,
    name: &str,
) -> Result<(), StoreError> {
    hang_if(table).await;
    let mut table = table.lock().unwrap();
    if table.leases.get(name).is_some_and(|(h, _)| h == id) {
        table.leases.remove(name);
    }
    Ok(())
}

/// [`super::Coordinator::advertise_layout`] of node `id`.
pub fn advertise(
    table: &Mutex<LeaseTable>,
    id: &str,
    layout: &str,
    lease_s: u64,
) -> Result<(), StoreError> {
    let mut table = table.lock().unwrap();
    if table.down {
        return Err(unreachable());
    }
    let until = Instant::now() + Duration::from_secs(lease_s);
    table
        .adverts
        .insert((layout.to_owned(), id.to_owned()), until);
    Ok(())
}

/// [`super::Coordinator::withdraw_layout`] of node `id`.
pub async fn withdraw(table: &Mutex<LeaseTable>, id: &str, layout: &str) -> Result<(), StoreError> {
    hang_if(table).await;
    let mut table = table.lock().unwrap();
    table.adverts.remove(&(layout.to_owned(), id.to_owned()));
    Ok(())
}

/// [`super::Coordinator::nodes`] asked by node `id`; counting the nodes stands for its
/// heartbeat too (its cluster loop beats as long as it lives). Heartbeats are in ms since
/// `base`.
pub async fn nodes(
    table: &Mutex<LeaseTable>,
    id: &str,
    base: Instant,
) -> Result<Vec<NodeInfo>, StoreError> {
    hang_if(table).await;
    let mut table = table.lock().unwrap();
    if table.down {
        return Err(unreachable());
    }
    let now = Instant::now();
    table.seen.insert(id.to_owned(), now);
    for id in table.beating.clone() {
        table.seen.insert(id, now);
    }
    Ok(table
        .seen
        .iter()
        .map(|(id, at)| NodeInfo {
            intakes: table
                .leases
                .iter()
                .filter(|(_, (holder, until))| holder == id && *until > now)
                .map(|(name, _)| name.clone())
                .collect(),
            layouts: table
                .adverts
                .iter()
                .filter(|((_, node), until)| node == id && **until > now)
                .map(|((layout, _), _)| layout.clone())
                .collect(),
            ..node_info(
                id,
                at.duration_since(base).as_millis() as u64,
                NodeVersion::current(),
            )
        })
        .collect())
}
