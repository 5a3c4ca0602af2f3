//! What tests read back about Socket Mode: connections, envelopes sent (retries included),
//! acknowledgements, and events that were never delivered.

use serde_json::Value;

use super::FakeSlack;

impl FakeSlack {
    /// How many Socket Mode connections are open now (those told to disconnect included
    /// until they close).
    pub fn open_connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// How many Socket Mode connections were ever opened (got `hello`).
    pub fn connections_opened(&self) -> usize {
        self.shared.lock().opened_total
    }

    /// Whether at least one Socket Mode connection is open.
    pub fn connected(&self) -> bool {
        self.open_connections() > 0
    }

    /// How many URLs `apps.connections.open` handed out.
    pub fn tickets_issued(&self) -> u64 {
        self.shared.lock().tickets
    }

    /// Every envelope sent, in order, as sent (retries are separate entries with their
    /// `retry_attempt` and `retry_reason`).
    pub fn envelopes_sent(&self) -> Vec<Value> {
        self.shared.lock().envelopes_sent.clone()
    }

    /// The `payload.event` of every `events_api` envelope sent, in order (retries again).
    pub fn events_sent(&self) -> Vec<Value> {
        let state = self.shared.lock();
        state
            .envelopes_sent
            .iter()
            .filter(|e| e["type"] == "events_api")
            .map(|e| e["payload"]["event"].clone())
            .collect()
    }

    /// The ids of the envelopes not acknowledged yet (out, or waiting for a connection).
    pub fn pending_envelopes(&self) -> Vec<String> {
        self.shared.lock().pending.keys().cloned().collect()
    }

    /// The envelope ids clients acknowledged, in order (repeats included).
    pub fn acks(&self) -> Vec<String> {
        self.shared.lock().acks.clone()
    }

    /// The acknowledgements that carried a `payload`: envelope id and payload, in order.
    pub fn ack_payloads(&self) -> Vec<(String, Value)> {
        self.shared.lock().ack_payloads.clone()
    }

    /// Every frame clients sent over Socket Mode, parsed (a frame that is not JSON as a
    /// string), in order.
    pub fn socket_received(&self) -> Vec<Value> {
        self.shared.lock().received.clone()
    }

    /// How many envelopes were given up after their last retry went unacknowledged.
    pub fn dropped_envelopes(&self) -> usize {
        self.shared.lock().dropped
    }

    /// The envelopes of events that happened while no connection was open (and
    /// [`FakeSlack::set_deliver_while_down`] was off): never delivered.
    pub fn undelivered_events(&self) -> Vec<Value> {
        self.shared.lock().undelivered.clone()
    }
}
