#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;

use chela_channel::{Conversation, Inbound, Limits, SentMessage, SinkError};
use futures_util::future::BoxFuture;

use super::shares::{Plan, part_of};
use super::*;
use crate::store::test_support::{FakeCoordinator, LeaseTable, node_info};
use crate::store::{NodeInfo, NodeVersion};

const LEASE: Duration = Duration::from_secs(10);

/// Node `id` holding the leases `intakes` and advertising `layouts`.
fn runner(id: &str, intakes: &[&str], layouts: &[&str]) -> NodeInfo {
    NodeInfo {
        intakes: intakes.iter().map(|s| (*s).to_owned()).collect(),
        layouts: layouts.iter().map(|s| (*s).to_owned()).collect(),
        ..node_info(id, 0, NodeVersion::current())
    }
}

fn set(v: &[u32]) -> BTreeSet<u32> {
    v.iter().copied().collect()
}

#[test]
fn a_node_takes_its_share_of_the_parts_over_the_nodes_running_them() {
    assert_eq!(share(2, 1), 2);
    assert_eq!(share(2, 2), 1);
    assert_eq!(
        share(2, 3),
        1,
        "a node may run none, but never more than a share"
    );
    assert_eq!(share(5, 2), 3);
    assert_eq!(share(4, 0), 4);
    assert_eq!(part_lease_name("discord", 2, 4), "intake:discord#2/4");
    assert_eq!(layout_name("discord", 4), "discord#/4");
    assert_eq!(part_of("intake:discord#2/4", "discord", 4), Some(2));
    assert_eq!(part_of("intake:discord#2/3", "discord", 4), None);
    assert_eq!(part_of("intake:discord#4/4", "discord", 4), None);
    assert_eq!(part_of("intake:discord", "discord", 4), None);
    assert_eq!(part_of("intake:telegram#1/4", "discord", 4), None);
}

#[test]
fn only_the_nodes_advertising_the_layout_count() {
    let nodes = [
        runner("me", &["intake:discord#0/2"], &["discord#/2"]),
        runner("b", &["intake:discord#1/2"], &["discord#/2"]),
        runner("no-discord", &["intake:telegram"], &[]),
        runner("three", &["intake:discord#0/3"], &["discord#/3"]),
        // Its intake ended; its lease has not expired yet.
        runner("ended", &["intake:discord#1/2"], &[]),
    ];
    let seen = view(&nodes, "me", "discord", 2);
    assert_eq!(seen.runners, 2, "{seen:?}");
    assert_eq!(seen.others_held, [1]);
    assert_eq!(seen.taken, set(&[1]));
    assert_eq!(view(&[], "me", "discord", 2), View::alone());
}

#[test]
fn the_plan_gives_back_the_highest_parts_over_the_share_and_asks_for_free_ones() {
    // b runs the layout and holds nothing: it would take what is given back.
    let below = View {
        runners: 2,
        others_held: vec![0],
        taken: set(&[]),
    };
    assert_eq!(
        plan(4, &set(&[0, 1, 2, 3]), &set(&[]), 2, &below),
        Plan {
            give_back: vec![3, 2],
            ask: vec![],
            room: 0,
        }
    );
    assert_eq!(
        plan(4, &set(&[1]), &set(&[2]), 2, &below),
        Plan {
            give_back: vec![],
            ask: vec![0, 3],
            room: 1,
        },
        "a part still stopping is not asked for"
    );
    let at_share = View {
        runners: 2,
        others_held: vec![1],
        taken: set(&[1]),
    };
    assert_eq!(
        plan(2, &set(&[0]), &set(&[]), 1, &at_share),
        Plan {
            give_back: vec![],
            ask: vec![],
            room: 2,
        },
        "nothing free: nothing asked for"
    );
}

#[test]
fn a_free_part_nobody_else_would_take_is_taken_over_the_share_and_kept() {
    // Every other node running the layout is at its share (1 of 3 over 3 nodes); part 2 is
    // free (its holder did not advertise the layout): taken over the share.
    let full = View {
        runners: 3,
        others_held: vec![1, 1],
        taken: set(&[0, 1]),
    };
    let taken = plan(3, &set(&[]), &set(&[]), 1, &full);
    assert_eq!(taken.ask, [2]);
    assert!(taken.room >= 1);
    let over = plan(4, &set(&[2, 3]), &set(&[]), 1, &full);
    assert_eq!(
        over.give_back,
        Vec::<u32>::new(),
        "kept: nobody below its share would take it"
    );
    // Once another node is below its share, the part over the share goes back, and no free
    // part is taken over the share.
    let joined = View {
        runners: 4,
        others_held: vec![1, 1, 0],
        taken: set(&[0, 1]),
    };
    let back = plan(4, &set(&[2, 3]), &set(&[]), 1, &joined);
    assert_eq!(back.give_back, [3]);
    assert_eq!(plan(4, &set(&[2]), &set(&[]), 1, &joined).room, 0);
}

/// A channel of `parts` parts; records which parts run on which node.
struct Sharded {
    parts: u32,
    node: String,
    log: Arc<Mutex<Vec<String>>>,
    /// Every part ends at once with a fatal error (a bad token).
    fails: bool,
}

impl Channel for Sharded {
    fn name(&self) -> &str {
        "discord"
    }
    fn limits(&self) -> Limits {
        Limits {
            max_chars: 2000,
            max_lines: None,
            edit_interval_ms: 0,
            group_edit_interval_ms: 0,
            threads: false,
        }
    }
    fn intake_parts(&self) -> u32 {
        self.parts
    }
    fn run(
        &self,
        _: Arc<dyn InboundSink>,
        _: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async { Err(ChannelError::Unsupported("run")) })
    }
    fn run_part(
        &self,
        part: u32,
        _sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            if self.fails {
                return Err(ChannelError::Unsupported("a bad token"));
            }
            self.log
                .lock()
                .unwrap()
                .push(format!("{} +{part}", self.node));
            shutdown.cancelled().await;
            self.log
                .lock()
                .unwrap()
                .push(format!("{} -{part}", self.node));
            Ok(())
        })
    }
    fn send<'a>(
        &'a self,
        _: &'a Conversation,
        _: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async { Err(ChannelError::Unsupported("send")) })
    }
    fn edit<'a>(
        &'a self,
        _: &'a Conversation,
        _: &'a SentMessage,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async { Err(ChannelError::Unsupported("edit")) })
    }
}

struct NoSink;

impl InboundSink for NoSink {
    fn accept(&self, _: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A cluster of nodes over one table, each running a two-part channel.
struct Cluster {
    table: Arc<Mutex<LeaseTable>>,
    log: Arc<Mutex<Vec<String>>>,
    base: Instant,
}

impl Cluster {
    fn new() -> Cluster {
        Cluster {
            table: Arc::default(),
            log: Arc::default(),
            base: Instant::now(),
        }
    }

    /// A cluster where node `a` started `after` ago: the cluster, a's stop token and task.
    async fn with_a(
        after: Duration,
    ) -> (
        Cluster,
        CancellationToken,
        JoinHandle<Result<(), ChannelError>>,
    ) {
        let cluster = Cluster::new();
        let (stop, task) = cluster.start("a");
        tokio::time::sleep(after).await;
        (cluster, stop, task)
    }

    /// Starts node `id`: its stop token and task.
    fn start(&self, id: &str) -> (CancellationToken, JoinHandle<Result<(), ChannelError>>) {
        self.start_with(id, 2, false)
    }

    /// Starts node `id` running a channel of `parts` parts (each of which `fails` at once).
    fn start_with(
        &self,
        id: &str,
        parts: u32,
        fails: bool,
    ) -> (CancellationToken, JoinHandle<Result<(), ChannelError>>) {
        let coordinator = Arc::new(FakeCoordinator::on_table(id, self.table.clone(), self.base));
        let channel = Arc::new(Sharded {
            parts,
            node: id.into(),
            log: self.log.clone(),
            fails,
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_parts(
            channel,
            Arc::new(NoSink),
            stop.clone(),
            coordinator,
            LEASE,
        ));
        (stop, task)
    }

    /// Which node holds each part's unexpired lease.
    fn holders(&self) -> Vec<Option<String>> {
        let now = Instant::now();
        let table = self.table.lock().unwrap();
        (0..2)
            .map(|p| {
                table
                    .leases
                    .get(&part_lease_name("discord", p, 2))
                    .filter(|(_, expires)| *expires > now)
                    .map(|(node, _)| node.clone())
            })
            .collect()
    }

    /// The parts running on each node now, from the log.
    fn running(&self) -> BTreeMap<String, BTreeSet<u32>> {
        let mut running: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for line in self.log.lock().unwrap().iter() {
            let (node, event) = line.split_once(' ').unwrap();
            let part: u32 = event[1..].parse().unwrap();
            let parts = running.entry(node.to_owned()).or_default();
            if event.starts_with('+') {
                parts.insert(part);
            } else {
                parts.remove(&part);
            }
        }
        running.retain(|_, parts| !parts.is_empty());
        running
    }
}

fn on(pairs: &[(&str, &[u32])]) -> BTreeMap<String, BTreeSet<u32>> {
    pairs
        .iter()
        .map(|(n, p)| ((*n).to_owned(), p.iter().copied().collect()))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn nodes_share_the_parts_and_a_dead_nodes_parts_move_after_the_lease() {
    let cluster = Cluster::new();
    // Alone, a node runs every part.
    let (a_stop, a) = cluster.start("a");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));

    // A second node: the first gives back its part over the new share, the second takes it.
    let (_b_stop, b) = cluster.start("b");
    tokio::time::sleep(LEASE).await;
    assert_eq!(cluster.running(), on(&[("a", &[0]), ("b", &[1])]));
    assert_eq!(cluster.holders(), [Some("a".into()), Some("b".into())]);

    // "kill -9" of a: its loop and its part stop at once, nothing is given back.
    a.abort();
    drop(a_stop);
    cluster.log.lock().unwrap().push("a -0".into());
    // Within the lease its part is still its own: nobody runs it twice.
    tokio::time::sleep(LEASE - LEASE / 5).await;
    assert_eq!(cluster.running(), on(&[("b", &[1])]));
    // After the lease (and a round or two), b runs both.
    tokio::time::sleep(LEASE / 5 * 3).await;
    assert_eq!(cluster.running(), on(&[("b", &[0, 1])]));
    assert_eq!(cluster.holders(), [Some("b".into()), Some("b".into())]);
    assert!(!b.is_finished());
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_gives_every_part_back_at_once() {
    let (cluster, stop, task) = Cluster::with_a(Duration::from_millis(10)).await;
    assert_eq!(cluster.holders(), [Some("a".into()), Some("a".into())]);
    stop.cancel();
    task.await.unwrap().unwrap();
    assert!(cluster.running().is_empty());
    assert_eq!(cluster.holders(), [None, None]);
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_ends_even_when_the_database_hangs() {
    let (cluster, stop, task) = Cluster::with_a(Duration::from_millis(10)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    cluster.table.lock().unwrap().hangs = true;
    stop.cancel();
    let ended = tokio::time::timeout(LEASE * 4, task).await;
    assert!(ended.is_ok(), "the stop waited on the database");
    assert!(cluster.running().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_part_whose_lease_another_node_took_stops_here() {
    let (cluster, _stop, _task) = Cluster::with_a(Duration::from_millis(10)).await;
    // Another node took part 1 (this node was paused past its lease).
    let far = Instant::now() + LEASE * 100;
    cluster
        .table
        .lock()
        .unwrap()
        .leases
        .insert(part_lease_name("discord", 1, 2), ("z".into(), far));
    tokio::time::sleep(LEASE / 5 + Duration::from_millis(10)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0])]));
}

#[tokio::test(start_paused = true)]
async fn parts_whose_lease_cannot_be_renewed_stop_before_it_can_expire() {
    let (cluster, _stop, _task) = Cluster::with_a(Duration::from_millis(1)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    // The database is gone: the parts go on while their lease is trusted (the lease less a
    // tick since it was won), and stop before it could expire.
    cluster.table.lock().unwrap().down = true;
    tokio::time::sleep(LEASE - LEASE / 5 - Duration::from_millis(20)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    tokio::time::sleep(LEASE / 5 - Duration::from_millis(10)).await;
    assert!(cluster.running().is_empty(), "{:?}", cluster.running());
}

#[tokio::test(start_paused = true)]
async fn parts_stop_before_their_lease_can_expire_even_when_the_database_hangs() {
    let (cluster, _stop, _task) = Cluster::with_a(Duration::from_millis(1)).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    // Every call now waits until its timeout (a tick): the rounds take several ticks each.
    cluster.table.lock().unwrap().hangs = true;
    tokio::time::sleep(LEASE - Duration::from_millis(5)).await;
    assert!(cluster.running().is_empty(), "{:?}", cluster.running());
}

#[tokio::test(start_paused = true)]
async fn a_node_without_the_intake_does_not_lower_the_share() {
    let cluster = Cluster::new();
    // Node "web" is alive (its heartbeat goes on) but runs no Discord.
    cluster.table.lock().unwrap().beating.insert("web".into());
    let (_stop, _task) = cluster.start("a");
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    assert_eq!(cluster.holders(), [Some("a".into()), Some("a".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_node_with_another_number_of_parts_does_not_lower_the_share() {
    let (cluster, _a_stop, _a) = Cluster::with_a(Duration::from_millis(10)).await;
    // b runs Discord in 3 shards: leases of other names, another layout.
    let (_b_stop, _b) = cluster.start_with("b", 3, false);
    tokio::time::sleep(LEASE * 3).await;
    let running = cluster.running();
    assert_eq!(running.get("a"), Some(&set(&[0, 1])), "{running:?}");
    assert_eq!(running.get("b"), Some(&set(&[0, 1, 2])), "{running:?}");
}

#[tokio::test(start_paused = true)]
async fn the_parts_of_a_node_whose_intake_ended_are_taken_by_the_others() {
    let (cluster, _a_stop, _a) = Cluster::with_a(Duration::from_millis(10)).await;
    // b's heartbeat goes on, but each of its parts ends at once with a fatal error.
    cluster.table.lock().unwrap().beating.insert("b".into());
    let (_b_stop, b) = cluster.start_with("b", 2, true);
    tokio::time::sleep(LEASE * 3).await;
    assert!(b.is_finished(), "b's intake ended");
    assert!(b.await.unwrap().is_err());
    assert_eq!(cluster.running(), on(&[("a", &[0, 1])]));
    assert_eq!(cluster.holders(), [Some("a".into()), Some("a".into())]);
    assert!(
        cluster
            .table
            .lock()
            .unwrap()
            .adverts
            .keys()
            .all(|(_, node)| node != "b"),
        "b no longer advertises the layout"
    );
}
