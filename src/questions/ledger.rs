//! The questions with buttons open in chats, kept in the store (every engine:
//! [`Store::open_questions`], one list per node), so a restart can end them. A question's
//! waiting run does not outlive the process (its turn runs again and asks anew), so after a
//! restart each message still showing buttons is edited to say the question ended, which
//! removes its buttons; a press on one a client still shows is told it ended, and a typed
//! `/approve` of its id answers that no such approval waits.

use std::sync::Mutex;

use super::buttons::Asked;
use crate::delivery::Notices;
use crate::store::{OpenQuestion as Open, Store};

/// What a message whose question ended at a restart now says, below its text.
pub const ENDED_BY_RESTART: &str = "⌛ ended: the gateway restarted; ask again.";

/// The questions with buttons open in chats, as the store keeps them.
pub struct Ledger {
    store: Store,
    /// The node whose list it is (`""`: a single gateway); `None`: kept nowhere (a cluster
    /// node without a configured `node_id` gets a new id at each start, so it could never
    /// find its questions again).
    node: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    open: Vec<Open>,
    /// What a previous process left open, until [`Ledger::end_left_open`] ends it.
    left: Vec<Open>,
    /// Bumped at each change: a write of an older list never lands after a newer one.
    version: u64,
    written: u64,
}

impl Ledger {
    /// The ledger under `node` in `store`: `Some("")` a single gateway, `Some(id)` a
    /// cluster node with a configured id, `None` kept nowhere. What a previous process
    /// left is read now, so questions asked from now on add to it.
    pub fn new(store: Store, node: Option<&str>) -> Ledger {
        let node = node.map(str::to_owned);
        let left: Vec<Open> = match &node {
            Some(node) => store.open_questions(node).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read the questions left open");
                Vec::new()
            }),
            None => Vec::new(),
        };
        let state = State {
            open: left.clone(),
            left,
            ..State::default()
        };
        Ledger {
            store,
            node,
            state: Mutex::new(state),
        }
    }

    /// Question `id` was asked as `asked`. Durable when it returns (a kill -9 right after
    /// still finds it).
    pub async fn add(&self, id: &str, asked: &Asked) {
        let open = Open {
            id: id.to_owned(),
            to: asked.to.clone(),
            message_id: asked.message.message_id.clone(),
            text: asked.text.clone(),
        };
        self.change(|all| all.push(open)).await;
        tracing::debug!(id, "question kept open in the store");
    }

    /// Question `id` ended (its messages were edited). Durable when it returns.
    pub async fn remove(&self, id: &str) {
        self.change(|all| all.retain(|o| o.id != id)).await;
    }

    /// Ends the questions a previous process left open: each message is edited to say so
    /// (its buttons go), and they leave the ledger.
    pub async fn end_left_open(&self, notices: &Notices) {
        let left = std::mem::take(&mut self.lock().left);
        if left.is_empty() {
            return;
        }
        tracing::info!(
            questions = left.len(),
            "ending the questions a previous run left open"
        );
        for open in &left {
            let message = chela_channel::SentMessage {
                message_id: open.message_id.clone(),
            };
            let text = format!("{}\n{ENDED_BY_RESTART}", open.text);
            notices.edit(&open.to, &message, &text).await;
        }
        self.change(|all| all.retain(|o| !left.contains(o))).await;
    }

    /// Applies `change` to the open questions and stores them (written outside the lock,
    /// and only when no newer list was written meanwhile), durably.
    async fn change(&self, change: impl FnOnce(&mut Vec<Open>)) {
        let Some(node) = &self.node else {
            return;
        };
        let (open, version) = {
            let mut state = self.lock();
            change(&mut state.open);
            state.version += 1;
            (state.open.clone(), state.version)
        };
        let stale = {
            let mut state = self.lock();
            let stale = state.written > version;
            if !stale {
                state.written = version;
            }
            stale
        };
        if stale {
            return;
        }
        if let Err(e) = self.store.put_open_questions(node, &open) {
            tracing::warn!(error = %e, "cannot keep the questions open in the store");
        }
        if let Err(e) = self.store.flush().await {
            tracing::warn!(error = %e, "cannot keep the questions open in the store");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn asked(message_id: &str) -> Asked {
        Asked {
            to: chela_channel::Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: chela_channel::ChatKind::Direct,
                chat_id: "42".into(),
                thread_id: None,
            },
            message: chela_channel::SentMessage {
                message_id: message_id.into(),
            },
            text: "🔐 Approval needed".into(),
        }
    }

    #[tokio::test]
    async fn open_questions_are_in_the_store_until_they_end() {
        let store = Store::temporary().unwrap();
        let ledger = Ledger::new(store.clone(), Some(""));
        ledger.add("ab12", &asked("7")).await;
        ledger.add("cd34", &asked("8")).await;
        ledger.remove("ab12").await;
        // A new process over the same store finds what is still open.
        let left = store.open_questions("").unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(
            (left[0].id.as_str(), left[0].message_id.as_str()),
            ("cd34", "8")
        );
        ledger.remove("cd34").await;
        assert!(store.open_questions("").unwrap().is_empty());
        // A new process finds what the previous one left, before anything is asked.
        ledger.add("ef56", &asked("9")).await;
        let next = Ledger::new(store, Some(""));
        assert_eq!(next.lock().left.len(), 1);
        assert_eq!(next.lock().open.len(), 1);
    }
}
