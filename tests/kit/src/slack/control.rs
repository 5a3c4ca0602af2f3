//! Test hooks: injected 429s, the ack timeout, delivery while no socket is open, and breaking
//! Socket Mode connections in the ways Slack does.

use std::time::Duration;

use serde_json::json;

use super::FakeSlack;
use super::state::Outgoing;

impl FakeSlack {
    /// Makes the next `count` calls of Web API `method` (`chat.postMessage`) that pass the
    /// token check answer HTTP 429 with `Retry-After: retry_after_s` and
    /// `{"ok":false,"error":"ratelimited"}`; nothing else happens for them.
    pub fn inject_429(&self, method: &str, count: usize, retry_after_s: u64) {
        self.shared
            .lock()
            .limits
            .insert(method.to_owned(), (count, retry_after_s));
    }

    /// Sets how long a client has to acknowledge an envelope before it is sent again
    /// (default 3 s); envelopes sent from now on use it.
    pub fn set_ack_timeout(&self, timeout: Duration) {
        self.shared.lock().ack_timeout = timeout;
        self.shared.touch();
    }

    /// While `on`, events that happen with no Socket Mode connection open wait for the next
    /// connection; while off (the default) they are never delivered (only stored), and a
    /// client has to catch up through `conversations.history`.
    pub fn set_deliver_while_down(&self, on: bool) {
        self.shared.lock().deliver_while_down = on;
    }

    /// Sends `{"type":"disconnect","reason":reason,..}` to every open connection (reasons
    /// Slack uses: `refresh_requested`, `warning`, `link_disabled`); each closes about a
    /// second later, or when the client closes it. Envelopes go to connections opened since,
    /// when there are any. Returns how many connections were told.
    pub fn disconnect(&self, reason: &str) -> usize {
        let frame = json!({
            "type": "disconnect",
            "reason": reason,
            "debug_info": { "host": "fake" },
        })
        .to_string();
        let mut state = self.shared.lock();
        let mut told = 0;
        for conn in state.conns.values_mut() {
            conn.draining = true;
            if conn.tx.send(Outgoing::Disconnect(frame.clone())).is_ok() {
                told += 1;
            }
        }
        drop(state);
        self.shared.touch();
        told
    }

    /// Closes every open connection at once, without a close frame; from now on they count
    /// as closed. Unacknowledged envelopes are sent again after the ack timeout, on the next
    /// connection. Returns how many connections were dropped.
    pub fn drop_connections(&self) -> usize {
        let mut state = self.shared.lock();
        let conns = std::mem::take(&mut state.conns);
        drop(state);
        for conn in conns.values() {
            let _ = conn.tx.send(Outgoing::Drop);
        }
        self.shared.touch();
        conns.len()
    }
}
