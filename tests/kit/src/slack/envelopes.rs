//! Socket Mode envelopes: wrapping events, choosing a connection (the newest that was not
//! told to disconnect), queueing while none is open, acknowledgements, and the timer that
//! sends an unacknowledged envelope again (`retry_attempt` + 1, `retry_reason: "timeout"`) up
//! to [`MAX_RETRIES`] times.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::json;
use super::state::{Outgoing, Pending, Shared, State};

/// How many times an unacknowledged envelope is sent again before it is dropped.
pub(crate) const MAX_RETRIES: u64 = 3;

impl State {
    /// Wraps `event` in an `events_api` envelope and delivers it; returns the envelope id.
    pub(crate) fn dispatch_event(&mut self, event: Value) -> String {
        self.next_event += 1;
        let id = uuid::Uuid::new_v4().to_string();
        let envelope = json::events_api(&id, self.next_event, event);
        self.deliver(envelope)
    }

    /// Sends `envelope` to a connection; with none open it waits for the next one if
    /// `deliver_while_down`, else it is lost (kept in `undelivered`). Returns its id.
    pub(crate) fn deliver(&mut self, envelope: Value) -> String {
        let id = envelope["envelope_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if self.target().is_none() && !self.deliver_while_down {
            self.undelivered.push(envelope);
            return id;
        }
        let pending = Pending {
            envelope,
            attempt: 0,
            deadline: None,
        };
        self.pending.insert(id.clone(), pending);
        self.waiting.push_back(id.clone());
        self.flush();
        id
    }

    /// The connection envelopes go to: the newest not told to disconnect, else the newest.
    fn target(&self) -> Option<u64> {
        let mut open = self.conns.iter().rev();
        open.clone()
            .find(|(_, c)| !c.draining)
            .or_else(|| open.next())
            .map(|(id, _)| *id)
    }

    /// Sends the waiting envelopes while a connection is open, starting their ack timers.
    pub(crate) fn flush(&mut self) {
        while let Some(conn) = self.target() {
            let Some(id) = self.waiting.pop_front() else {
                return;
            };
            let Some(pending) = self.pending.get_mut(&id) else {
                continue;
            };
            let mut envelope = pending.envelope.clone();
            envelope["retry_attempt"] = json!(pending.attempt);
            let reason = if pending.attempt > 0 { "timeout" } else { "" };
            envelope["retry_reason"] = json!(reason);
            let frame = Outgoing::Text(envelope.to_string());
            let sent = self
                .conns
                .get(&conn)
                .is_some_and(|c| c.tx.send(frame).is_ok());
            if !sent {
                // The socket's task has ended: forget it and try another.
                self.waiting.push_front(id);
                self.conns.remove(&conn);
                continue;
            }
            pending.deadline = Some(Instant::now() + self.ack_timeout);
            self.envelopes_sent.push(envelope);
        }
    }

    /// Handles the envelopes whose ack timer ran out by `now`: sent again (on a connection
    /// open now, else the next one), or dropped after [`MAX_RETRIES`] retries.
    pub(crate) fn expire(&mut self, now: Instant) {
        let mut expired: Vec<(Instant, String)> = self
            .pending
            .iter()
            .filter_map(|(id, p)| p.deadline.filter(|d| *d <= now).map(|d| (d, id.clone())))
            .collect();
        expired.sort();
        for (_, id) in expired {
            let Some(pending) = self.pending.get_mut(&id) else {
                continue;
            };
            if pending.attempt >= MAX_RETRIES {
                self.pending.remove(&id);
                self.dropped += 1;
            } else {
                pending.attempt += 1;
                pending.deadline = None;
                self.waiting.push_back(id);
            }
        }
        self.flush();
    }

    /// The earliest ack deadline, if any envelope is out.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().filter_map(|p| p.deadline).min()
    }

    /// Records the client's acknowledgement of `id` (with its `payload`, if any).
    pub(crate) fn ack(&mut self, id: &str, payload: Option<Value>) {
        self.acks.push(id.to_owned());
        if let Some(payload) = payload {
            self.ack_payloads.push((id.to_owned(), payload));
        }
        self.pending.remove(id);
        self.waiting.retain(|w| w != id);
    }
}

/// Starts the redelivery timer: it sleeps until the earliest ack deadline (woken early by
/// any change) and sends what ran out again, until the fake stops.
pub(crate) fn spawn_timer(shared: Arc<Shared>) {
    tokio::spawn(async move {
        loop {
            let next = shared.lock().next_deadline();
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shared.stop.cancelled() => return,
                () = shared.timer.notified() => {}
                () = sleep => {
                    shared.lock().expire(Instant::now());
                    shared.changed.notify_waiters();
                }
            }
        }
    });
}
