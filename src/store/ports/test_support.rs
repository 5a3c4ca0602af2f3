//! A test double of [`Coordinator`] for the gateway's cluster tests: a node that holds no
//! partition, answers [`Coordinator::nodes`] with what the test sets, takes or is refused
//! the intake leases as the test says (and records each ask), and, on a [`Bus`], sends its
//! notifications to every node of the bus, itself included, as `NOTIFY` does. Made with
//! [`FakeCoordinator::on_table`], its intake leases, layout adverts and node list are those
//! of a [`LeaseTable`] shared with other nodes instead.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::cluster::{Coordinator, Lease, NodeInfo};
use super::version::NodeVersion;
use super::{StoreError, StoreFuture};

mod leases;

pub use leases::LeaseTable;

/// Nodes whose published payloads reach every node of the bus, the sender included.
#[derive(Default, Clone)]
pub struct Bus(Arc<Mutex<Vec<mpsc::UnboundedSender<String>>>>);

impl Bus {
    /// A node `id` on this bus.
    pub fn node(&self, id: &str) -> Arc<FakeCoordinator> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.0.lock().unwrap().push(tx);
        let mut node = FakeCoordinator::new(id);
        node.bus = Some(self.clone());
        node.events = Mutex::new(Some(rx));
        Arc::new(node)
    }
}

/// One node's coordinator, as the test sets it.
#[derive(Default)]
pub struct FakeCoordinator {
    id: String,
    bus: Option<Bus>,
    events: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The shared table this node's leases, adverts and node list are in, and the instant
    /// its heartbeats count from.
    table: Option<(Arc<Mutex<LeaseTable>>, Instant)>,
    /// What [`Coordinator::nodes`] answers.
    pub nodes: Mutex<Vec<NodeInfo>>,
    /// What [`Coordinator::lock_epoch`] answers.
    pub epoch: std::sync::atomic::AtomicU64,
    /// Another node holds every intake lease.
    pub other_holds: AtomicBool,
    /// The store cannot be reached: asking for an intake lease fails.
    pub unreachable: AtomicBool,
    /// Each intake lease asked for: its name and length (s).
    pub intake_asks: Mutex<Vec<(String, u64)>>,
    /// Intake leases given back.
    pub intakes_released: AtomicUsize,
    /// The layouts advertised now, with their length (s).
    pub layouts: Mutex<Vec<(String, u64)>>,
    /// The nodes cannot be read ([`Coordinator::nodes`] fails).
    pub nodes_fail: AtomicBool,
    /// The partition leases this node holds: what [`Coordinator::renew`] answers.
    pub leases: Mutex<Vec<Lease>>,
    /// Free partition leases, taken by [`Coordinator::acquire`].
    pub free: Mutex<Vec<Lease>>,
    /// Partitions given back ([`Coordinator::release`]).
    pub released: Mutex<Vec<u32>>,
    /// Publishing never ends (a database that does not answer): nothing is sent.
    pub publish_hangs: AtomicBool,
    /// How many nodes [`Coordinator::heartbeat`] says are alive (0: this one alone).
    pub alive: AtomicUsize,
}

impl FakeCoordinator {
    /// Node `id`, alone (its notifications go nowhere).
    pub fn new(id: &str) -> FakeCoordinator {
        FakeCoordinator {
            id: id.to_owned(),
            ..FakeCoordinator::default()
        }
    }

    /// Node `id` on `table`, whose heartbeats count from `base`.
    pub fn on_table(id: &str, table: Arc<Mutex<LeaseTable>>, base: Instant) -> FakeCoordinator {
        FakeCoordinator {
            table: Some((table, base)),
            ..FakeCoordinator::new(id)
        }
    }

    /// How many times an intake lease was asked for.
    pub fn asked(&self) -> usize {
        self.intake_asks.lock().unwrap().len()
    }
}

/// Node `id` as the store lists it: seen at `last_seen_ms`, running `version`.
pub fn node_info(id: &str, last_seen_ms: u64, version: NodeVersion) -> NodeInfo {
    NodeInfo {
        id: id.into(),
        started_ms: 0,
        last_seen_ms,
        partitions: Vec::new(),
        intakes: Vec::new(),
        layouts: Vec::new(),
        connected: true,
        runs: Vec::new(),
        version,
    }
}

impl Coordinator for FakeCoordinator {
    fn node(&self) -> &str {
        &self.id
    }
    fn lock_epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
    fn heartbeat<'a>(&'a self, _: u64, _: &'a [String]) -> StoreFuture<'a, usize> {
        let alive = self.alive.load(Ordering::SeqCst).max(1);
        Box::pin(async move { Ok(alive) })
    }
    fn renew(&self, _: u64) -> StoreFuture<'_, Vec<Lease>> {
        let held = self.leases.lock().unwrap().clone();
        Box::pin(async move { Ok(held) })
    }
    fn acquire(&self, most: usize, _: u64) -> StoreFuture<'_, Vec<Lease>> {
        let mut free = self.free.lock().unwrap();
        let most = most.min(free.len());
        let taken: Vec<Lease> = free.drain(..most).collect();
        self.leases.lock().unwrap().extend(taken.iter().copied());
        Box::pin(async move { Ok(taken) })
    }
    fn release<'a>(&'a self, partitions: &'a [u32]) -> StoreFuture<'a, ()> {
        self.leases
            .lock()
            .unwrap()
            .retain(|l| !partitions.contains(&l.partition));
        self.released.lock().unwrap().extend_from_slice(partitions);
        Box::pin(async { Ok(()) })
    }
    fn hold_intake<'a>(&'a self, name: &'a str, lease_s: u64) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.intake_asks
                .lock()
                .unwrap()
                .push((name.to_owned(), lease_s));
            if let Some((table, _)) = &self.table {
                return leases::hold_intake(table, &self.id, name, lease_s).await;
            }
            if self.unreachable.load(Ordering::SeqCst) {
                return Err(StoreError::Db("unreachable".into()));
            }
            Ok(!self.other_holds.load(Ordering::SeqCst))
        })
    }
    fn release_intake<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.intakes_released.fetch_add(1, Ordering::SeqCst);
            match &self.table {
                Some((table, _)) => leases::release_intake(table, &self.id, name).await,
                None => Ok(()),
            }
        })
    }
    fn leave(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    fn advertise_layout<'a>(&'a self, layout: &'a str, lease_s: u64) -> StoreFuture<'a, ()> {
        if let Some((table, _)) = &self.table {
            let advertised = leases::advertise(table, &self.id, layout, lease_s);
            return Box::pin(async { advertised });
        }
        let mut layouts = self.layouts.lock().unwrap();
        layouts.retain(|(l, _)| l != layout);
        layouts.push((layout.to_owned(), lease_s));
        Box::pin(async { Ok(()) })
    }
    fn withdraw_layout<'a>(&'a self, layout: &'a str) -> StoreFuture<'a, ()> {
        if let Some((table, _)) = &self.table {
            return Box::pin(leases::withdraw(table, &self.id, layout));
        }
        self.layouts.lock().unwrap().retain(|(l, _)| l != layout);
        Box::pin(async { Ok(()) })
    }
    fn nodes(&self) -> StoreFuture<'_, Vec<NodeInfo>> {
        if self.nodes_fail.load(Ordering::SeqCst) {
            return Box::pin(async { Err(StoreError::Db("unreachable".into())) });
        }
        if let Some((table, base)) = &self.table {
            return Box::pin(leases::nodes(table, &self.id, *base));
        }
        let nodes = self.nodes.lock().unwrap().clone();
        Box::pin(async move { Ok(nodes) })
    }
    fn wakeups(&self) -> Option<mpsc::UnboundedReceiver<u32>> {
        None
    }
    fn publish_events(&self, payload: String) -> StoreFuture<'_, ()> {
        if self.publish_hangs.load(Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        if let Some(bus) = &self.bus {
            for tx in bus.0.lock().unwrap().iter() {
                let _ = tx.send(payload.clone());
            }
        }
        Box::pin(async { Ok(()) })
    }
    fn remote_events(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.events.lock().unwrap().take()
    }
}
