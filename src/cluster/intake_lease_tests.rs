#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use chela_channel::{Conversation, Inbound, Limits, SentMessage, SinkError};
use futures_util::future::BoxFuture;

use super::*;
use crate::store::test_support::FakeCoordinator;

const LEASE: Duration = Duration::from_secs(10);

/// A channel whose intake runs until stopped, recording each start and stop.
#[derive(Default)]
struct Poller {
    log: Mutex<Vec<&'static str>>,
}

impl Poller {
    fn log(&self) -> Vec<&'static str> {
        self.log.lock().unwrap().clone()
    }
}

impl Channel for Poller {
    fn name(&self) -> &str {
        "poller"
    }
    fn limits(&self) -> Limits {
        Limits {
            max_chars: 4096,
            max_lines: None,
            edit_interval_ms: 0,
            group_edit_interval_ms: 0,
            threads: false,
        }
    }
    fn run(
        &self,
        _sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.log.lock().unwrap().push("start");
            shutdown.cancelled().await;
            self.log.lock().unwrap().push("stop");
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

/// Starts `run_leased` for a fresh poller over `intake`.
fn start(
    intake: &Arc<FakeCoordinator>,
) -> (
    Arc<Poller>,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), ChannelError>>,
) {
    let poller = Arc::new(Poller::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(run_leased(
        poller.clone(),
        Arc::new(NoSink),
        stop.clone(),
        intake.clone(),
        LEASE,
    ));
    (poller, stop, task)
}

/// Lets the spawned tasks run for `d` of paused time.
async fn advance(d: Duration) {
    tokio::time::sleep(d).await;
}

#[tokio::test(start_paused = true)]
async fn the_intake_runs_only_while_this_node_holds_the_lease() {
    let intake = Arc::new(FakeCoordinator::new("me"));
    intake.other_holds.store(true, Ordering::SeqCst);
    let (poller, stop, task) = start(&intake);
    advance(LEASE * 3).await;
    assert!(poller.log().is_empty(), "ran while another node held it");
    assert!(intake.asked() >= 10, "it kept asking");
    assert!(
        intake
            .intake_asks
            .lock()
            .unwrap()
            .iter()
            .all(|(name, lease_s)| (name.as_str(), *lease_s) == ("intake:poller", 10)),
        "the channel's lease, for the lease's length"
    );

    // The other node died: its lease expired, and this node takes the intake over.
    intake.other_holds.store(false, Ordering::SeqCst);
    advance(LEASE / 5 + Duration::from_millis(1)).await;
    assert_eq!(poller.log(), ["start"]);

    // Another node holds it now (this one was paused too long): the intake stops at the
    // next renewal and waits for the lease again.
    intake.other_holds.store(true, Ordering::SeqCst);
    advance(LEASE / 5 + Duration::from_millis(1)).await;
    assert_eq!(poller.log(), ["start", "stop"]);
    advance(LEASE).await;
    assert_eq!(poller.log(), ["start", "stop"]);

    intake.other_holds.store(false, Ordering::SeqCst);
    advance(LEASE / 5 + Duration::from_millis(1)).await;
    assert_eq!(poller.log(), ["start", "stop", "start"]);

    // A graceful stop ends the intake and gives the lease back at once.
    stop.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(poller.log(), ["start", "stop", "start", "stop"]);
    assert_eq!(intake.intakes_released.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_unrenewable_lease_stops_the_intake_before_it_can_expire() {
    let intake = Arc::new(FakeCoordinator::new("me"));
    let (poller, stop, task) = start(&intake);
    advance(Duration::from_millis(1)).await;
    assert_eq!(poller.log(), ["start"]);
    // The database is unreachable: the intake goes on while the lease is trusted (the lease
    // less a tick since the last renewal), and stops before the lease could expire.
    intake.unreachable.store(true, Ordering::SeqCst);
    advance(LEASE - LEASE / 5 - Duration::from_millis(10)).await;
    assert_eq!(poller.log(), ["start"]);
    advance(Duration::from_millis(20)).await;
    assert_eq!(poller.log(), ["start", "stop"]);
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[test]
fn a_channel_runs_here_when_a_lease_of_it_or_of_one_of_its_parts_is_held() {
    let held = [
        "intake:telegram".to_owned(),
        "intake:discord#1/2".to_owned(),
    ];
    assert!(runs_here("telegram", &held));
    assert!(runs_here("discord", &held));
    assert!(!runs_here("disc", &held));
    assert!(!runs_here("discord", &held[..1]));
    let unprefixed = ["telegram".to_owned(), "discord#1/2".to_owned()];
    assert!(
        !runs_here("telegram", &unprefixed),
        "not intake lease names"
    );
    assert!(!runs_here("discord", &unprefixed));
}
