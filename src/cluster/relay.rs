//! In a cluster, the RPC's event feed (`events.subscribe`, the panel's live runs) shows the
//! runs of every node: each node publishes its own run events through the coordinator
//! (PostgreSQL `NOTIFY`, batched every [`BATCH_WINDOW`]) and merges what the other nodes
//! publish into its feed beside its own. Best effort, as a slow subscriber's feed
//! is: an event bigger than a notification holds arrives with its text shortened, and
//! events published while a node's database connection is down are lost to the others.

use std::sync::{Arc, Weak};
use std::time::Duration;

use chela_channel::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use tokio_util::sync::CancellationToken;

use super::Cluster;
use super::peers::Envelope;
use crate::domain::events::{Lifecycle, LiveEvent, RunEvent};
use crate::store::{Coordinator, MAX_EVENT_PAYLOAD};

/// How long a node gathers its events before it publishes them in one notification.
pub const BATCH_WINDOW: Duration = Duration::from_millis(50);
/// What the text of an event too big for a notification is cut to (bytes).
const SHORTENED: usize = 2_000;

/// One notification: the events one node published.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    node: String,
    events: Vec<LiveEvent>,
}

/// What answers the calls other nodes make to this one (stop a session running here, the
/// exec approvals waiting here).
pub trait AnswersCalls: Send + Sync {
    /// Answers `question` (through [`super::peers::Peers::answer`]).
    fn answer(self: Arc<Self>, question: Envelope) -> BoxFuture<'static, ()>;
}

/// The handles the relay runs with.
pub struct Relay {
    /// This node.
    pub cluster: Arc<Cluster>,
    /// This node's run bus.
    pub live: broadcast::Sender<LiveEvent>,
    /// The feed the RPC reads: this node's events and the other nodes'.
    pub feed: broadcast::Sender<LiveEvent>,
    /// Where calls from other nodes go; the relay ends when it is gone.
    pub calls: Weak<dyn AnswersCalls>,
    /// Fires when the gateway stops.
    pub shutdown: CancellationToken,
}

/// Starts relaying between this node's run bus and the other nodes'.
pub fn start(relay: Relay) {
    let coordinator = relay.cluster.coordinator().clone();
    if let Some(remote) = coordinator.remote_events() {
        // Weak handles: the task must not keep the node (and its database connection) or
        // the feed alive once the gateway is gone.
        let merge = Merge {
            cluster: Arc::downgrade(&relay.cluster),
            feed: relay.feed.downgrade(),
            calls: relay.calls,
        };
        tokio::spawn(merge_remote(merge, remote));
    }
    let (to_publish, publishing) = tokio::sync::mpsc::channel(PUBLISH_QUEUE);
    tokio::spawn(forward_local(
        relay.live.subscribe(),
        relay.feed,
        to_publish,
        relay.shutdown.clone(),
    ));
    tokio::spawn(publish(publishing, coordinator, relay.shutdown));
}

/// What merging the other nodes' payloads uses.
struct Merge {
    cluster: Weak<Cluster>,
    feed: broadcast::WeakSender<LiveEvent>,
    calls: Weak<dyn AnswersCalls>,
}

/// Events waiting to be published to the other nodes; past it they are dropped for them (a
/// slow database never holds up this node's own feed).
const PUBLISH_QUEUE: usize = 1024;

/// Hands this node's events to its feed at once, and queues them for the other nodes.
async fn forward_local(
    mut live: broadcast::Receiver<LiveEvent>,
    feed: broadcast::Sender<LiveEvent>,
    to_publish: tokio::sync::mpsc::Sender<LiveEvent>,
    stop: CancellationToken,
) {
    let mut dropped: u64 = 0;
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = live.recv() => event,
        };
        match event {
            Ok(event) => {
                let _ = feed.send(event.clone());
                if to_publish.try_send(event).is_err() {
                    dropped += 1;
                    tracing::warn!(
                        dropped,
                        "cluster: run events not relayed: the database is slow"
                    );
                }
            }
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "cluster: the event relay fell behind");
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Publishes queued events in batches: the first of a batch waits at most [`BATCH_WINDOW`].
async fn publish(
    mut queued: tokio::sync::mpsc::Receiver<LiveEvent>,
    coordinator: Arc<dyn Coordinator>,
    stop: CancellationToken,
) {
    let node = coordinator.node().to_owned();
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return,
            first = queued.recv() => first,
        };
        let Some(first) = first else { return };
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + BATCH_WINDOW;
        while let Ok(Some(event)) = tokio::time::timeout_at(deadline, queued.recv()).await {
            batch.push(event);
        }
        for payload in payloads(&node, batch) {
            if let Err(e) = coordinator.publish_events(payload).await {
                tracing::debug!(error = %e, "cluster: run events not published to the other nodes");
            }
        }
    }
}

/// The notifications that carry `events` of `node`: as many events each as fit.
fn payloads(node: &str, events: Vec<LiveEvent>) -> Vec<String> {
    let mut out = Vec::new();
    let mut batch = Batch {
        node: node.to_owned(),
        events: Vec::new(),
    };
    // Each event is encoded once to size it: the batch is its envelope, the events and a
    // comma between two.
    let envelope = encoded_len(&batch);
    let mut size = envelope;
    for event in events {
        let (event, len) = fitting(envelope, event);
        let grown = size + len + usize::from(!batch.events.is_empty());
        if grown > MAX_EVENT_PAYLOAD && !batch.events.is_empty() {
            out.extend(encode(&batch));
            batch.events.clear();
            size = envelope + len;
        } else {
            size = grown;
        }
        batch.events.push(event);
    }
    out.extend(encode(&batch));
    out
}

/// `batch` as JSON, unless it holds no events.
fn encode(batch: &Batch) -> Option<String> {
    if batch.events.is_empty() {
        return None;
    }
    serde_json::to_string(batch).ok()
}

fn encoded_len<T: Serialize>(value: &T) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |s| s.len())
}

/// `event` and its encoded length, its text shortened (halved until it fits; escaping may make
/// a short text long) when alone in an `envelope`-byte batch it would not fit in a
/// notification.
fn fitting(envelope: usize, mut event: LiveEvent) -> (LiveEvent, usize) {
    let mut len = encoded_len(&event);
    let mut keep = SHORTENED;
    while envelope.saturating_add(len) > MAX_EVENT_PAYLOAD && keep > 0 {
        let Some(text) = text_of(&mut event.event) else {
            break;
        };
        let mut end = keep.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
        keep /= 2;
        len = encoded_len(&event);
    }
    (event, len)
}

/// The text of `event` that may be long, if it has one.
fn text_of(event: &mut RunEvent) -> Option<&mut String> {
    match event {
        RunEvent::Assistant { delta: text }
        | RunEvent::Reasoning { delta: text }
        | RunEvent::Sent { text }
        | RunEvent::Lifecycle(Lifecycle::End { text, .. })
        | RunEvent::Lifecycle(Lifecycle::Error { message: text }) => Some(text),
        RunEvent::Finished(record) => Some(&mut record.text),
        RunEvent::Lifecycle(Lifecycle::Start) | RunEvent::Tool(_) | RunEvent::Compaction(_) => None,
    }
}

/// Merges the other nodes' events into the feed (this node's own are skipped: they went to
/// the feed directly), and hands the calls between nodes to [`super::peers`].
async fn merge_remote(merge: Merge, mut remote: tokio::sync::mpsc::UnboundedReceiver<String>) {
    let Merge {
        cluster,
        feed,
        calls,
    } = merge;
    while let Some(payload) = remote.recv().await {
        let (Some(calls), Some(cluster), Some(feed)) =
            (calls.upgrade(), cluster.upgrade(), feed.upgrade())
        else {
            return;
        };
        if super::peers::is_call(&payload) {
            // A call between nodes shares the channel ([`super::peers`]).
            if let Some(question) = cluster.peers().take(&payload) {
                let handle = calls.answer(question.clone());
                cluster.peers().dispatch(&question, handle);
            }
            continue;
        }
        match serde_json::from_str::<Batch>(&payload) {
            Ok(batch) if batch.node != cluster.coordinator().node() => {
                for event in batch.events {
                    let _ = feed.send(event);
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "cluster: a run event notification not understood")
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn delta(seq: u64, text: &str) -> LiveEvent {
        LiveEvent {
            run_id: "run-1".into(),
            session_key: "agent:main:main".into(),
            seq,
            event: RunEvent::Assistant { delta: text.into() },
        }
    }

    #[test]
    fn events_are_packed_into_notifications_that_fit() {
        let events: Vec<LiveEvent> = (1..=40).map(|n| delta(n, &"x".repeat(500))).collect();
        let payloads = payloads("n1", events);
        assert!(payloads.len() > 2, "{}", payloads.len());
        let mut seqs = Vec::new();
        for p in &payloads {
            assert!(p.len() <= MAX_EVENT_PAYLOAD, "{}", p.len());
            let batch: Batch = serde_json::from_str(p).unwrap();
            assert_eq!(batch.node, "n1");
            seqs.extend(batch.events.iter().map(|e| e.seq));
        }
        assert_eq!(seqs, (1..=40).collect::<Vec<_>>(), "all, in order");
        assert!(super::payloads("n1", Vec::new()).is_empty());
    }

    #[test]
    fn text_that_escaping_makes_long_is_cut_until_it_fits() {
        // Each control character is six bytes in JSON.
        let payloads = payloads("n1", vec![delta(1, &"\u{1}".repeat(5_000))]);
        assert!(
            payloads[0].len() <= MAX_EVENT_PAYLOAD,
            "{}",
            payloads[0].len()
        );
    }

    #[test]
    fn an_event_too_big_alone_arrives_shortened() {
        let big = delta(1, &"é".repeat(10_000));
        let payloads = payloads("n1", vec![big, delta(2, "small")]);
        let batch: Batch = serde_json::from_str(&payloads[0]).unwrap();
        let RunEvent::Assistant { delta } = &batch.events[0].event else {
            panic!("not a delta")
        };
        assert!(
            delta.ends_with('…') && delta.len() <= SHORTENED + 3,
            "{}",
            delta.len()
        );
        let all: usize = payloads
            .iter()
            .map(|p| serde_json::from_str::<Batch>(p).unwrap().events.len())
            .sum();
        assert_eq!(all, 2);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod roundtrip_tests {
    use super::*;
    use crate::domain::events::ToolEvent;
    use crate::domain::run::{RunRecord, RunStatus};

    #[test]
    fn every_kind_of_event_survives_the_trip() {
        let mut record = RunRecord::for_test("run-1", "agent:main:main", &[1]);
        record.status = RunStatus::Aborted;
        let events = vec![
            RunEvent::Lifecycle(Lifecycle::Start),
            RunEvent::Assistant { delta: "hi".into() },
            RunEvent::Tool(ToolEvent::Start {
                id: "t".into(),
                name: "ls".into(),
                summary: "-la".into(),
            }),
            RunEvent::Lifecycle(Lifecycle::End {
                text: "x".into(),
                aborted: true,
            }),
            RunEvent::Lifecycle(Lifecycle::Error {
                message: "no".into(),
            }),
            RunEvent::Sent { text: "s".into() },
            RunEvent::Finished(Box::new(record)),
        ];
        for (seq, event) in events.into_iter().enumerate() {
            let live = LiveEvent {
                run_id: "run-1".into(),
                session_key: "agent:main:main".into(),
                seq: seq as u64,
                event,
            };
            let text = payloads("n", vec![live.clone()]).pop().unwrap();
            let batch: Batch = serde_json::from_str(&text)
                .map_err(|e| format!("{e}: {text}"))
                .unwrap();
            assert_eq!(batch.events[0].event, live.event);
        }
    }
}
