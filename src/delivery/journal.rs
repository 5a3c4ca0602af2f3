//! The reply journal: a run's reply notes every message it sends, and start-up recovery takes
//! back what an unfinished reply of the previous process left.

use std::sync::Arc;

use chela_channel::{BoxFuture, Channel, Conversation, SentMessage};

use crate::reply::SentJournal;
use crate::store::{ReplyJournal, Store};

/// Whether this node still holds a session (a cluster node's lease), asked before a reply
/// sends a new message.
pub type Holds = Arc<dyn Fn() -> bool + Send + Sync>;

/// Journals the messages of run `run_id`'s reply into `to`.
pub struct RunJournal {
    store: Store,
    run_id: String,
    to: Conversation,
    /// On a cluster node: whether it still holds the reply's session.
    holds: Option<Holds>,
}

impl RunJournal {
    /// A journal for run `run_id` replying into `to`; with `holds` (a cluster node) the reply
    /// sends nothing new once it says no.
    pub fn shared(
        store: Store,
        run_id: String,
        to: Conversation,
        holds: Option<Holds>,
    ) -> Arc<dyn SentJournal> {
        Arc::new(RunJournal {
            store,
            run_id,
            to,
            holds,
        })
    }
}

impl SentJournal for RunJournal {
    fn sent<'a>(&'a self, message: &'a SentMessage, durable: bool) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let noted = self
                .store
                .journal_sent(&self.run_id, &self.to, &message.message_id, durable)
                .await;
            if let Err(e) = noted {
                tracing::warn!(error = %e, run_id = %self.run_id, "cannot journal a sent message");
            }
        })
    }

    fn may_send(&self) -> bool {
        self.holds.as_ref().is_none_or(|holds| holds())
    }
}

/// Deletes the messages of `journal`, which run `run` sent (best effort: a message the
/// platform will not delete stays), and removes them from its journal (what the run noted
/// since, going again, stays). When the channel does not run at this start, the journal is
/// kept for a start where it does (`channel` is `None`).
pub async fn take_back(
    store: &Store,
    channel: Option<Arc<dyn Channel>>,
    run: &str,
    journal: &ReplyJournal,
) {
    let Some(channel) = channel else {
        return;
    };
    for id in &journal.messages {
        let message = SentMessage {
            message_id: id.clone(),
        };
        if let Err(e) = channel.delete(&journal.conversation, &message).await {
            tracing::warn!(error = %e, run_id = %run, message = %id, "cannot take back a message of an unfinished reply");
        }
    }
    if let Err(e) = store.journal_taken_back(run, &journal.messages) {
        tracing::warn!(error = %e, run_id = %run, "cannot update a reply journal");
    }
}

/// Forgets run `run`'s journal.
pub fn forget(store: &Store, run: &str) {
    if let Err(e) = store.forget_journal(run) {
        tracing::warn!(error = %e, run_id = %run, "cannot forget a reply journal");
    }
}
