//! For unit tests: a sink that keeps what it takes and its cursors, refusing chosen texts
//! once, and an [`Intake`] around it that needs no Slack (names are known).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_channel::{BoxFuture, Inbound, InboundSink, SinkError};

use crate::api::Api;
use crate::intake::Intake;
use crate::state::State;

/// Takes every message but the texts in `refuse` (each refused once); keeps cursors as
/// the stores do (raised ones only move forward).
#[derive(Default)]
pub struct Sink {
    refuse: Mutex<Vec<String>>,
    /// Senders whose messages the gateway would not admit (strangers).
    pub strangers: Mutex<Vec<String>>,
    taken: Mutex<Vec<Inbound>>,
    cursors: Mutex<HashMap<String, i64>>,
}

impl Sink {
    /// A sink refusing each of `texts` once.
    pub fn refusing(texts: &[&str]) -> Arc<Sink> {
        Arc::new(Sink {
            refuse: Mutex::new(texts.iter().map(|t| t.to_string()).collect()),
            ..Sink::default()
        })
    }

    /// The texts taken, in order.
    pub fn texts(&self) -> Vec<String> {
        let taken = self.taken.lock().unwrap();
        taken.iter().map(|i| i.text.clone()).collect()
    }

    /// The cursor of `place` (`D1`, `C1/1.000100`) of account `default`.
    pub fn cursor(&self, place: &str) -> Option<i64> {
        let cursors = self.cursors.lock().unwrap();
        cursors.get(&format!("slack:default:last:{place}")).copied()
    }
}

impl InboundSink for Sink {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        let mut refuse = self.refuse.lock().unwrap();
        if let Some(i) = refuse.iter().position(|t| *t == inbound.text) {
            refuse.remove(i);
            return Box::pin(async { Err(SinkError("the store failed".into())) });
        }
        self.taken.lock().unwrap().push(inbound);
        Box::pin(async { Ok(()) })
    }

    fn accept_admitted(&self, inbound: Inbound) -> BoxFuture<'_, Result<bool, SinkError>> {
        let admitted = !self.strangers.lock().unwrap().contains(&inbound.sender.id);
        let accepted = self.accept(inbound);
        Box::pin(async move { accepted.await.map(|()| admitted) })
    }

    fn cursors<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Vec<(String, i64)>> {
        let cursors = self.cursors.lock().unwrap();
        let found = cursors
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(name, at)| (name.clone(), *at))
            .collect();
        Box::pin(async move { found })
    }

    fn raise_cursor<'a>(
        &'a self,
        name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let mut cursors = self.cursors.lock().unwrap();
        let at = cursors.entry(name.to_string()).or_insert(value);
        *at = (*at).max(value);
        Box::pin(async { Ok(()) })
    }
}

/// An intake of account `default` for bot `UBOT` into `sink`; `U1` is known as `ann`, and
/// the Web API is nowhere (nothing here may call it).
pub fn intake(sink: Arc<Sink>) -> Intake {
    let state = Arc::new(State::default());
    state.set_bot_user("UBOT");
    state.remember_name("U1", "ann");
    Intake {
        sink,
        state,
        api: Arc::new(Api::new("http://127.0.0.1:9/api", "xoxb-test")),
        account: "default".into(),
        channels: Vec::new().into(),
    }
}

/// Lets the cursor raises spawned in the background run.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}
