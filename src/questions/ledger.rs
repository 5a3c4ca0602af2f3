//! The questions with buttons open in chats, kept in the store (every engine: the store's
//! settings, as JSON under one key per node), so a restart can end them. A question's
//! waiting run does not outlive the process (its turn runs again and asks anew), so after a
//! restart each message still showing buttons is edited to say the question ended, which
//! removes its buttons; a press on one a client still shows is told it ended, and a typed
//! `/approve` of its id answers that no such approval waits.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::buttons::Asked;
use crate::delivery::Notices;
use crate::store::Store;

/// What a message whose question ended at a restart now says, below its text.
pub const ENDED_BY_RESTART: &str = "⌛ ended: the gateway restarted; ask again.";

/// One message showing a question's buttons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Open {
    /// The question (an approval or permission id, a pairing request's key and owner).
    id: String,
    to: chela_channel::Conversation,
    message_id: String,
    text: String,
}

/// The questions with buttons open in chats, as the store keeps them.
pub struct Ledger {
    store: Store,
    key: String,
    open: Mutex<Vec<Open>>,
}

impl Ledger {
    /// The ledger of node `node` (empty: a single gateway) in `store`.
    pub fn new(store: Store, node: &str) -> Ledger {
        let key = match node {
            "" => "chela:questions".to_owned(),
            node => format!("chela:questions:{node}"),
        };
        Ledger {
            store,
            key,
            open: Mutex::new(Vec::new()),
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
        self.change(|all| all.push(open));
        self.flush().await;
        tracing::debug!(id, "question kept open in the store");
    }

    /// Question `id` ended (its messages were edited). Durable when it returns.
    pub async fn remove(&self, id: &str) {
        self.change(|all| all.retain(|o| o.id != id));
        self.flush().await;
    }

    async fn flush(&self) {
        if let Err(e) = self.store.flush().await {
            tracing::warn!(error = %e, "cannot keep the questions open in the store");
        }
    }

    /// Ends the questions a previous process left open: each message is edited to say so
    /// (its buttons go), and the ledger is emptied.
    pub async fn end_left_open(&self, notices: &Notices) {
        let left: Vec<Open> = match self.store.get_settings(&self.key) {
            Ok(left) => left.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the questions left open");
                return;
            }
        };
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
        self.change(|all| all.retain(|o| !left.contains(o)));
        self.flush().await;
    }

    /// Applies `change` to the open questions and stores them.
    fn change(&self, change: impl FnOnce(&mut Vec<Open>)) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        change(&mut open);
        let stored = match open.is_empty() {
            true => self.store.clear_settings(&self.key),
            false => self.store.put_settings(&self.key, &*open),
        };
        if let Err(e) = stored {
            tracing::warn!(error = %e, "cannot keep the questions open in the store");
        }
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
        let ledger = Ledger::new(store.clone(), "");
        ledger.add("ab12", &asked("7")).await;
        ledger.add("cd34", &asked("8")).await;
        ledger.remove("ab12").await;
        // A new process over the same store finds what is still open.
        let left: Vec<Open> = store.get_settings("chela:questions").unwrap().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(
            (left[0].id.as_str(), left[0].message_id.as_str()),
            ("cd34", "8")
        );
        ledger.remove("cd34").await;
        assert!(
            store
                .get_settings::<Vec<Open>>("chela:questions")
                .unwrap()
                .is_none()
        );
        assert_eq!(Ledger::new(store, "n1").key, "chela:questions:n1");
    }
}
