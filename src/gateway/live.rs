//! Live run events for the RPC's subscribers: every event of every run (lifecycle, assistant
//! text deltas, tool calls, compactions), tagged with its run and session, as it happens.

use tokio::sync::{broadcast, mpsc};

use crate::domain::events::RunEvent;

/// How many live events a slow subscriber may fall behind before it misses some.
pub const LIVE_BUFFER: usize = 1024;
/// Events buffered between a run and the tee.
const TEE_BUFFER: usize = 256;

pub use crate::domain::run::LiveEvent;

/// Returns the sender a run writes its events to. Each event is published on `live` (when
/// anyone listens) and then handed to `reply`, in order; the task ends with the run.
pub fn tee(
    run_id: String,
    session_key: String,
    live: broadcast::Sender<LiveEvent>,
    reply: Option<mpsc::Sender<RunEvent>>,
) -> mpsc::Sender<RunEvent> {
    let (tx, mut rx) = mpsc::channel::<RunEvent>(TEE_BUFFER);
    tokio::spawn(async move {
        let mut seq = 0;
        while let Some(event) = rx.recv().await {
            seq += 1;
            if live.receiver_count() > 0 {
                let _ = live.send(LiveEvent {
                    run_id: run_id.clone(),
                    session_key: session_key.clone(),
                    seq,
                    event: event.clone(),
                });
            }
            if let Some(reply) = &reply {
                // The reply stream may be gone (a sub-agent's is dropped); the live feed goes on.
                let _ = reply.send(event).await;
            }
        }
    });
    tx
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::events::Lifecycle;

    #[tokio::test]
    async fn events_reach_subscribers_and_the_reply_in_order() {
        let (live, mut watcher) = broadcast::channel(LIVE_BUFFER);
        let (reply_tx, mut reply) = mpsc::channel(8);
        let run = tee("run-1".into(), "k".into(), live, Some(reply_tx));
        run.send(RunEvent::Lifecycle(Lifecycle::Start))
            .await
            .unwrap();
        run.send(RunEvent::Assistant { delta: "hi".into() })
            .await
            .unwrap();
        drop(run);
        let first = watcher.recv().await.unwrap();
        assert_eq!((first.run_id.as_str(), first.seq), ("run-1", 1));
        let second = watcher.recv().await.unwrap();
        assert_eq!(second.seq, 2);
        assert_eq!(second.event, RunEvent::Assistant { delta: "hi".into() });
        assert_eq!(
            reply.recv().await,
            Some(RunEvent::Lifecycle(Lifecycle::Start))
        );
        assert_eq!(
            reply.recv().await,
            Some(RunEvent::Assistant { delta: "hi".into() })
        );
        assert_eq!(reply.recv().await, None, "ends with the run");
    }

    #[tokio::test]
    async fn a_run_without_a_reply_still_feeds_subscribers() {
        let (live, mut watcher) = broadcast::channel(LIVE_BUFFER);
        let run = tee("run-2".into(), "k".into(), live, None);
        run.send(RunEvent::Lifecycle(Lifecycle::Start))
            .await
            .unwrap();
        assert_eq!(watcher.recv().await.unwrap().run_id, "run-2");
    }
}
