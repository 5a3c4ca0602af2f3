//! `events.subscribe`: the event feed of one connection. It pushes an `agent` event for every
//! event of every run as it happens (lifecycle, assistant text deltas, tool calls,
//! compactions) and a `run` event when a run finishes, optionally only for one session. A
//! client that does not read loses events (counted in the log, visible as a gap in `seq`),
//! never the gateway's memory.

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::api::GatewayApi;
use super::protocol::{self, Fault};
use super::runs::run_result;
use crate::domain::events::LiveEvent;
use crate::domain::events::RunEvent;

/// The params of `events.subscribe`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SubscribeParams {
    /// Only this session's runs (absent: every session).
    #[serde(default)]
    pub(super) session: Option<String>,
}

impl SubscribeParams {
    /// Reads the params of `events.subscribe`.
    pub(super) fn parse(params: &Value) -> Result<SubscribeParams, Fault> {
        protocol::params(params)
    }
}

/// The `agent` event payload of one live event.
pub(super) fn agent_event(live: &LiveEvent) -> Value {
    let mut payload = serde_json::to_value(&live.event).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut payload {
        fields.insert("runId".into(), Value::String(live.run_id.clone()));
        fields.insert("session".into(), Value::String(live.session_key.clone()));
        fields.insert("seq".into(), Value::from(live.seq));
    }
    payload
}

/// The receivers of a feed, taken before `events.subscribe` is answered, so no event after
/// the answer can be missed.
pub(super) struct Sources {
    live: broadcast::Receiver<LiveEvent>,
}

impl Sources {
    /// Subscribes to the gateway's run bus now.
    pub(super) fn of(api: &dyn GatewayApi) -> Sources {
        Sources {
            live: api.live_events(),
        }
    }
}

/// The frame of one event of the bus: a `run` event for a run's record, an `agent` event
/// for everything before it.
fn frame(event: &LiveEvent) -> String {
    match &event.event {
        RunEvent::Finished(record) => protocol::event("run", run_result(&record.run_id, record)),
        _ => protocol::event("agent", agent_event(event)),
    }
}

/// Feeds `out` until the gateway stops or the connection goes. A new `events.subscribe` on
/// the connection changes `filter` and the feed goes on from the same place in the bus, so
/// no event is lost between the two (`chela agent` narrows its feed to its session).
pub(super) async fn feed(
    sources: Sources,
    stop: CancellationToken,
    filter: watch::Receiver<SubscribeParams>,
    out: mpsc::Sender<String>,
) {
    let Sources { mut live } = sources;
    let wanted = |session: &str| {
        let filter = filter.borrow();
        filter.session.as_deref().is_none_or(|s| s == session)
    };
    let mut dropped: u64 = 0;
    loop {
        let frame = tokio::select! {
            _ = stop.cancelled() => return,
            event = live.recv() => match event {
                Ok(event) if wanted(&event.session_key) => frame(&event),
                Ok(_) => continue,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "rpc: live events lagged");
                    continue;
                }
                Err(RecvError::Closed) => return,
            },
        };
        match out.try_send(frame) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                dropped += 1;
                tracing::warn!(dropped, "rpc: a subscriber does not read; event dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::events::{Lifecycle, RunEvent};
    use serde_json::json;

    fn delta(session: &str, seq: u64) -> LiveEvent {
        LiveEvent {
            run_id: "run-1".into(),
            session_key: session.into(),
            seq,
            event: RunEvent::Assistant { delta: "x".into() },
        }
    }

    #[tokio::test]
    async fn a_narrowed_feed_goes_on_from_where_it_was() {
        let (bus, live) = broadcast::channel(16);
        let (filter_tx, filter) = watch::channel(SubscribeParams::default());
        let (out, mut frames) = mpsc::channel(16);
        // Published before the narrowing, not yet read by the feed.
        bus.send(delta("mine", 1)).unwrap();
        bus.send(delta("other", 1)).unwrap();
        filter_tx
            .send(SubscribeParams {
                session: Some("mine".into()),
            })
            .unwrap();
        bus.send(delta("mine", 2)).unwrap();
        bus.send(delta("other", 2)).unwrap();
        drop(bus);
        feed(Sources { live }, CancellationToken::new(), filter, out).await;
        let mut seen = Vec::new();
        while let Ok(frame) = frames.try_recv() {
            seen.push(frame);
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(
            seen.iter().all(|f| f.contains("\"session\":\"mine\"")),
            "{seen:?}"
        );
    }

    #[test]
    fn an_agent_event_carries_its_run_session_and_number() {
        let event = LiveEvent {
            run_id: "run-3".into(),
            session_key: "agent:main:main".into(),
            seq: 2,
            event: RunEvent::Assistant { delta: "he".into() },
        };
        assert_eq!(
            agent_event(&event),
            json!({"stream": "assistant", "delta": "he", "runId": "run-3", "session": "agent:main:main", "seq": 2})
        );
        let end = LiveEvent {
            event: RunEvent::Lifecycle(Lifecycle::End {
                text: "hello".into(),
                aborted: false,
            }),
            ..event
        };
        assert_eq!(agent_event(&end)["phase"], "end");
        assert_eq!(agent_event(&end)["stream"], "lifecycle");
    }

    #[test]
    fn subscribe_takes_an_optional_session_and_nothing_else() {
        assert_eq!(SubscribeParams::parse(&Value::Null).unwrap().session, None);
        let one = SubscribeParams::parse(&json!({"session": "k"})).unwrap();
        assert_eq!(one.session.as_deref(), Some("k"));
        assert!(SubscribeParams::parse(&json!({"sessionKey": "k"})).is_err());
    }
}
