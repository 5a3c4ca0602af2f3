//! The durable queue of accepted-but-not-yet-run turns: seq (u64 big-endian) -> [`PendingTurn`].
//!
//! A turn is enqueued (and flushed) before the platform is acknowledged and removed once it has
//! run, so a crash in between runs it after restart (SPEC 1.4, SPEC 3).

use super::{SledStore, be_u64, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::PendingTurn;

impl SledStore {
    /// [`QueueStore::enqueue`](crate::store::ports::QueueStore::enqueue).
    pub(super) async fn put_pending(&self, turn: &PendingTurn) -> Result<u64, StoreError> {
        let bytes = encode(turn)?;
        let seq = self.inner.db.generate_id().map_err(db_err)?;
        self.inner
            .pending
            .insert(seq.to_be_bytes(), bytes)
            .map_err(db_err)?;
        self.sync().await?;
        Ok(seq)
    }

    /// Removes turn `seq`; returns whether it was there. Not flushed.
    pub(super) fn drop_pending(&self, seq: u64) -> Result<bool, StoreError> {
        let old = self
            .inner
            .pending
            .remove(seq.to_be_bytes())
            .map_err(db_err)?;
        Ok(old.is_some())
    }

    /// Whether turn `seq` is still pending.
    pub(super) fn has_pending(&self, seq: u64) -> Result<bool, StoreError> {
        self.inner
            .pending
            .contains_key(seq.to_be_bytes())
            .map_err(db_err)
    }

    /// Every pending turn, oldest first.
    pub(super) fn read_pending(&self) -> Result<Vec<(u64, PendingTurn)>, StoreError> {
        self.inner
            .pending
            .iter()
            .map(|kv| {
                let (k, v) = kv.map_err(db_err)?;
                Ok((be_u64("pending", &k)?, decode("pending", &v)?))
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(super) mod tests {
    use chela_channel::{ChatKind, Conversation, Inbound, Sender};

    use crate::store::{PendingTurn, Store};

    pub(crate) fn inbound(chat: &str, message_id: &str, text: &str) -> Inbound {
        Inbound {
            conversation: Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: ChatKind::Direct,
                chat_id: chat.into(),
                thread_id: None,
            },
            sender: Sender {
                id: "u1".into(),
                name: "Ann".into(),
                username: None,
            },
            message_id: message_id.into(),
            text: text.into(),
            reply_to: None,
            mentioned: true,
            timestamp_ms: 5,
            interaction: None,
            attachments: Vec::new(),
        }
    }

    fn turn(key: &str, text: &str) -> PendingTurn {
        PendingTurn {
            session_key: key.into(),
            inbound: inbound("1", text, text),
            queued_ms: 9,
        }
    }

    #[tokio::test]
    async fn pending_turns_survive_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let seqs = {
            let store = Store::open(dir.path()).unwrap();
            let mut seqs = Vec::new();
            for (key, text) in [("a", "1"), ("b", "2"), ("a", "3")] {
                seqs.push(store.enqueue(&turn(key, text)).await.unwrap());
            }
            seqs
        };
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        let store = Store::open(dir.path()).unwrap();
        let all = store.all_pending().unwrap();
        assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), seqs);
        assert_eq!(all[1].1, turn("b", "2"));
        let for_a = store.pending_for("a").unwrap();
        assert_eq!(
            for_a
                .iter()
                .map(|(_, t)| t.inbound.text.as_str())
                .collect::<Vec<_>>(),
            ["1", "3"]
        );
        assert!(store.remove_pending(seqs[0]).unwrap());
        assert!(!store.remove_pending(seqs[0]).unwrap());
        let next = store.enqueue(&turn("c", "4")).await.unwrap();
        assert!(next > seqs[2]);
        assert_eq!(store.all_pending().unwrap().len(), 3);
    }
}
