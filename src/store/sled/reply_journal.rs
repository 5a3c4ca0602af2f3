//! The reply journal (run id -> JSON [`ReplyJournal`]): every chat message a reply has sent
//! while its run is unfinished or its final undelivered. After a crash those messages are
//! taken back before the turn runs again or its final is resent, so a restart never leaves a
//! reply in the chat twice. A run's record is forgotten once its final is delivered.

use chela_channel::Conversation;

use super::{SledStore, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::ReplyJournal;

impl SledStore {
    /// Notes that run `run` sent message `message_id` into `to`; with `durable`, returns once
    /// it is on disk (else sled's next flush takes it there, at most half a second later).
    pub(super) async fn note_sent(
        &self,
        run: &str,
        to: &Conversation,
        message_id: &str,
        durable: bool,
    ) -> Result<(), StoreError> {
        let mut journal = self.read_journal(run)?.unwrap_or_else(|| ReplyJournal {
            conversation: to.clone(),
            messages: Vec::new(),
        });
        if !journal.messages.iter().any(|m| m == message_id) {
            journal.messages.push(message_id.to_owned());
        }
        self.inner
            .reply_journal
            .insert(run, encode(&journal)?)
            .map_err(db_err)?;
        if durable {
            self.sync().await?;
        }
        Ok(())
    }

    /// What run `run` has sent, if anything is journaled.
    pub(super) fn read_journal(&self, run: &str) -> Result<Option<ReplyJournal>, StoreError> {
        match self.inner.reply_journal.get(run).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("reply_journal", &bytes)?)),
            None => Ok(None),
        }
    }

    /// Every journaled run, by run id. A record that cannot be read is logged and skipped,
    /// so it cannot hide the others.
    pub(super) fn read_journals(&self) -> Result<Vec<(String, ReplyJournal)>, StoreError> {
        let mut out = Vec::new();
        for item in self.inner.reply_journal.iter() {
            let (key, bytes) = item.map_err(db_err)?;
            let run = String::from_utf8_lossy(&key).into_owned();
            match decode("reply_journal", &bytes) {
                Ok(journal) => out.push((run, journal)),
                Err(e) => {
                    tracing::warn!(error = %e, run_id = %run, "skipping an unreadable reply journal")
                }
            }
        }
        Ok(out)
    }

    /// Removes `taken` from run `run`'s journal (they were taken back) and keeps what was
    /// noted meanwhile (the run going again); an emptied journal goes.
    pub(super) fn take_back_journal(&self, run: &str, taken: &[String]) -> Result<(), StoreError> {
        let mut failed = None;
        self.inner
            .reply_journal
            .fetch_and_update(run, |old| {
                let bytes = old?;
                let mut journal: ReplyJournal = match decode("reply_journal", bytes) {
                    Ok(journal) => journal,
                    Err(_) => return Some(bytes.to_vec()),
                };
                journal.messages.retain(|m| !taken.contains(m));
                if journal.messages.is_empty() {
                    return None;
                }
                match encode(&journal) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        failed = Some(e);
                        Some(bytes.to_vec())
                    }
                }
            })
            .map_err(db_err)?;
        failed.map_or(Ok(()), Err)
    }

    /// Forgets run `run`'s journal (its reply is delivered, or was taken back).
    pub(super) fn drop_journal(&self, run: &str) -> Result<(), StoreError> {
        self.inner.reply_journal.remove(run).map_err(db_err)?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::store::Store;
    use chela_channel::ChatKind;

    fn chat() -> Conversation {
        Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: "42".into(),
            thread_id: None,
        }
    }

    #[tokio::test]
    async fn a_runs_messages_are_kept_in_order_once_each_until_forgotten() {
        let store = Store::temporary().unwrap();
        assert_eq!(store.journal("run-1").unwrap(), None);
        store
            .journal_sent("run-1", &chat(), "10", true)
            .await
            .unwrap();
        store
            .journal_sent("run-1", &chat(), "11", true)
            .await
            .unwrap();
        store
            .journal_sent("run-1", &chat(), "10", true)
            .await
            .unwrap();
        store
            .journal_sent("run-2", &chat(), "12", true)
            .await
            .unwrap();
        let journal = store.journal("run-1").unwrap().unwrap();
        assert_eq!(journal.messages, ["10", "11"]);
        assert_eq!(journal.conversation, chat());
        let runs: Vec<String> = store
            .all_journals()
            .unwrap()
            .into_iter()
            .map(|(run, _)| run)
            .collect();
        assert_eq!(runs, ["run-1", "run-2"]);
        store.forget_journal("run-1").unwrap();
        assert_eq!(store.journal("run-1").unwrap(), None);
        assert_eq!(store.all_journals().unwrap().len(), 1);
    }
}
