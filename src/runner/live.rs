//! Live run events for the RPC's subscribers: every event of every run (lifecycle, assistant
//! text deltas, tool calls, compactions), tagged with its run and session, as it happens.

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::domain::events::RunEvent;
use crate::domain::run::RunRecord;

/// How many live events a slow subscriber may fall behind before it misses some.
pub const LIVE_BUFFER: usize = 1024;
/// Events buffered between a run and the tee.
const TEE_BUFFER: usize = 256;

pub use crate::domain::events::LiveEvent;

/// One run's side of the bus: the sender its events go to, and the end of the run.
pub struct RunBus {
    /// Where the run writes its events.
    pub events: mpsc::Sender<RunEvent>,
    /// Fires once the run's [`RunEvent::Finished`] is published.
    published: oneshot::Receiver<()>,
}

impl RunBus {
    /// Ends the run on the bus with its record, and returns once subscribers have it.
    pub async fn finish(self, record: RunRecord) {
        if self
            .events
            .send(RunEvent::Finished(Box::new(record)))
            .await
            .is_ok()
        {
            // Err: the tee is gone, nothing more will be published.
            let _ = self.published.await;
        }
    }
}

/// Starts the tee of one run. Each event the run writes is published on `live` (when
/// anyone listens) and then handed to `reply`, in order; [`RunEvent::Finished`] goes only
/// to `live`. The task ends when every sender is gone.
pub fn tee(
    run_id: String,
    session_key: String,
    live: broadcast::Sender<LiveEvent>,
    reply: Option<mpsc::Sender<RunEvent>>,
) -> RunBus {
    let (tx, mut rx) = mpsc::channel::<RunEvent>(TEE_BUFFER);
    let (published_tx, published) = oneshot::channel();
    let mut published_tx = Some(published_tx);
    tokio::spawn(async move {
        let mut seq = 0;
        while let Some(event) = rx.recv().await {
            seq += 1;
            let finished = matches!(event, RunEvent::Finished(_));
            if live.receiver_count() > 0 {
                let _ = live.send(LiveEvent {
                    run_id: run_id.clone(),
                    session_key: session_key.clone(),
                    seq,
                    event: event.clone(),
                });
            }
            if finished {
                if let Some(done) = published_tx.take() {
                    let _ = done.send(());
                }
            } else if let Some(reply) = &reply {
                // The reply stream may be gone (a sub-agent's is dropped); the live feed goes on.
                let _ = reply.send(event).await;
            }
        }
    });
    RunBus {
        events: tx,
        published,
    }
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
        let run = tee("run-1".into(), "k".into(), live, Some(reply_tx)).events;
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
        let run = tee("run-2".into(), "k".into(), live, None).events;
        run.send(RunEvent::Lifecycle(Lifecycle::Start))
            .await
            .unwrap();
        assert_eq!(watcher.recv().await.unwrap().run_id, "run-2");
    }

    #[tokio::test]
    async fn finish_returns_once_the_record_is_published_and_it_skips_the_reply() {
        let (live, mut watcher) = broadcast::channel(LIVE_BUFFER);
        let (reply_tx, mut reply) = mpsc::channel(8);
        let bus = tee("run-3".into(), "k".into(), live, Some(reply_tx));
        let record = RunRecord {
            run_id: "run-3".into(),
            seqs: vec![3],
            session_key: "k".into(),
            status: crate::domain::run::RunStatus::Ok,
            text: "done".into(),
            started_ms: 1,
            ended_ms: 2,
            usage: Default::default(),
            context_tokens: 0,
            cost_usd: None,
        };
        bus.finish(record.clone()).await;
        // Already published when finish returned: no waiting needed.
        let event = watcher.try_recv().unwrap();
        assert_eq!(event.event, RunEvent::Finished(Box::new(record)));
        assert_eq!(reply.recv().await, None, "the record is not the reply's");
    }
}
