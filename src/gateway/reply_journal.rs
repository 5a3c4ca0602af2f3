//! The gateway's side of the reply journal: a run's reply notes every message it sends, and
//! start-up recovery takes back what an unfinished reply of the previous process left.

use std::sync::Arc;

use chela_channel::{BoxFuture, Conversation, SentMessage};

use super::Core;
use super::cluster::Cluster;
use crate::reply::SentJournal;
use crate::store::{ReplyJournal, Store};

/// Journals the messages of run `run_id`'s reply into `to`.
pub struct RunJournal {
    store: Store,
    run_id: String,
    to: Conversation,
    /// On a cluster node: the node and the session the reply belongs to.
    held: Option<(Arc<Cluster>, String)>,
}

impl RunJournal {
    /// A journal for run `run_id` of session `key` replying into `to`; on a cluster node
    /// (`cluster`) the reply sends nothing new once this node no longer holds `key`.
    pub fn shared(
        store: Store,
        run_id: String,
        to: Conversation,
        cluster: Option<&Arc<Cluster>>,
        key: &str,
    ) -> Arc<dyn SentJournal> {
        let held = cluster.map(|c| (c.clone(), key.to_owned()));
        Arc::new(RunJournal {
            store,
            run_id,
            to,
            held,
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
        self.held
            .as_ref()
            .is_none_or(|(cluster, key)| cluster.owns(key))
    }
}

/// Deletes the messages of `journal`, which run `run` sent (best effort: a message the
/// platform will not delete stays), and removes them from its journal (what the run noted
/// since, going again, stays). When the channel does not run at this start, the journal is
/// kept for a start where it does.
pub async fn take_back(core: &Arc<Core>, run: &str, journal: &ReplyJournal) {
    let Some(channel) = core.channel(&journal.conversation.channel) else {
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
    if let Err(e) = core.store.journal_taken_back(run, &journal.messages) {
        tracing::warn!(error = %e, run_id = %run, "cannot update a reply journal");
    }
}

/// Forgets run `run`'s journal.
pub fn forget(core: &Core, run: &str) {
    if let Err(e) = core.store.forget_journal(run) {
        tracing::warn!(error = %e, run_id = %run, "cannot forget a reply journal");
    }
}
