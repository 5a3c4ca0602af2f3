//! Sub-agent links: child session key -> [`SubagentLink`] (its parent, label and state).
//!
//! A link is written in the same sled transaction as the child's first pending turn, and
//! settled (state `done`) in the same transaction that removes the child's pending turn and
//! queues the parent's follow-up turn, so a crash at any point hands the child's result to
//! the parent exactly once.

use sled::Transactional;
use sled::transaction::ConflictableTransactionError;

use super::{SledStore, abort, db_err, tx_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{PendingTurn, SubagentLink, SubagentState};

impl SledStore {
    /// [`BindingStore::spawn_subagent`](crate::store::ports::BindingStore::spawn_subagent): one
    /// transaction over `subagents` and `pending`, then a flush.
    pub(super) async fn spawn_subagent_now(
        &self,
        child: &str,
        link: &SubagentLink,
        first: &PendingTurn,
    ) -> Result<u64, StoreError> {
        let link_bytes = encode(link)?;
        let turn_bytes = encode(first)?;
        let seq = self.inner.db.generate_id().map_err(db_err)?;
        (&self.inner.subagents, &self.inner.pending)
            .transaction(|(subagents, pending)| {
                subagents.insert(child.as_bytes(), link_bytes.as_slice())?;
                pending.insert(&seq.to_be_bytes(), turn_bytes.as_slice())?;
                Ok::<_, ConflictableTransactionError<StoreError>>(())
            })
            .map_err(tx_err)?;
        self.sync().await?;
        Ok(seq)
    }

    /// The link of sub-agent session `child`, if it is one.
    pub(super) fn read_subagent(&self, child: &str) -> Result<Option<SubagentLink>, StoreError> {
        match self.inner.subagents.get(child).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("subagents", &bytes)?)),
            None => Ok(None),
        }
    }

    /// Every sub-agent `parent` spawned, oldest first.
    pub(super) fn children_of(
        &self,
        parent: &str,
    ) -> Result<Vec<(String, SubagentLink)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.inner.subagents.iter() {
            let (k, v) = kv.map_err(db_err)?;
            let link: SubagentLink = decode("subagents", &v)?;
            if link.parent == parent {
                out.push((String::from_utf8_lossy(&k).into_owned(), link));
            }
        }
        out.sort_by_key(|(_, link)| link.created_ms);
        Ok(out)
    }

    /// Marks a running sub-agent as stopped by its parent; false when it was not running.
    pub(super) fn stop_child(&self, child: &str) -> Result<bool, StoreError> {
        let Some(mut link) = self.read_subagent(child)? else {
            return Ok(false);
        };
        if link.state != SubagentState::Running {
            return Ok(false);
        }
        let old = encode(&link)?;
        link.state = SubagentState::Stopped;
        let new = encode(&link)?;
        let swapped = self
            .inner
            .subagents
            .compare_and_swap(child, Some(old), Some(new))
            .map_err(db_err)?;
        Ok(swapped.is_ok())
    }

    /// [`BindingStore::finish_subagent`](crate::store::ports::BindingStore::finish_subagent): one
    /// transaction over `subagents`, `pending` and `dedupe`, then a flush.
    pub(super) async fn finish_subagent_now(
        &self,
        child: &str,
        seqs: &[u64],
        follow_up: Option<(&str, &PendingTurn)>,
    ) -> Result<Option<u64>, StoreError> {
        let turn = match follow_up {
            Some((dedupe_key, turn)) => Some((dedupe_key, encode(turn)?)),
            None => None,
        };
        let seq = self.inner.db.generate_id().map_err(db_err)?;
        let mark = super::now_ms().to_be_bytes();
        let queued = (
            &self.inner.subagents,
            &self.inner.pending,
            &self.inner.dedupe,
        )
            .transaction(|(subagents, pending, dedupe)| {
                for s in seqs {
                    pending.remove(&s.to_be_bytes())?;
                }
                let Some(bytes) = subagents.get(child)? else {
                    return abort(StoreError::UnknownSession(child.to_owned()));
                };
                let mut link: SubagentLink = match decode("subagents", &bytes) {
                    Ok(link) => link,
                    Err(e) => return abort(e),
                };
                if link.state == SubagentState::Done {
                    return Ok(false);
                }
                let report = link.state == SubagentState::Running;
                link.state = SubagentState::Done;
                match encode(&link) {
                    Ok(bytes) => subagents.insert(child.as_bytes(), bytes)?,
                    Err(e) => return abort(e),
                };
                let Some((dedupe_key, bytes)) = turn.as_ref().filter(|_| report) else {
                    return Ok(false);
                };
                if dedupe.get(*dedupe_key)?.is_some() {
                    return Ok(false);
                }
                dedupe.insert(*dedupe_key, &mark[..])?;
                pending.insert(&seq.to_be_bytes(), bytes.as_slice())?;
                Ok(true)
            })
            .map_err(tx_err)?;
        self.sync().await?;
        Ok(queued.then_some(seq))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::store::sled::pending::tests::inbound;
    use crate::store::{PendingTurn, Store, SubagentLink, SubagentState};

    fn link(parent: &str, created_ms: u64) -> SubagentLink {
        SubagentLink {
            parent: parent.into(),
            label: Some("job".into()),
            parent_target: None,
            created_ms,
            state: SubagentState::Running,
        }
    }

    fn turn(key: &str, text: &str) -> PendingTurn {
        PendingTurn {
            session_key: key.into(),
            inbound: inbound("1", text, text),
            queued_ms: 1,
        }
    }

    #[tokio::test]
    async fn a_spawn_records_the_link_and_the_first_turn_together() {
        let store = Store::temporary().unwrap();
        let child = "agent:main:subagent:c1";
        let seq = store
            .spawn_subagent(child, &link("p", 1), &turn(child, "task"))
            .await
            .unwrap();
        assert_eq!(store.subagent_parent(child).unwrap().as_deref(), Some("p"));
        assert_eq!(store.subagent_parent("p").unwrap(), None);
        assert_eq!(store.pending_for(child).unwrap()[0].0, seq);
        store
            .spawn_subagent("c0", &link("p", 0), &turn("c0", "x"))
            .await
            .unwrap();
        let children: Vec<String> = store
            .subagents_of("p")
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(children, ["c0", child]);
    }

    #[tokio::test]
    async fn the_result_reaches_the_parent_exactly_once() {
        let store = Store::temporary().unwrap();
        let child = "c1";
        let seq = store
            .spawn_subagent(child, &link("p", 1), &turn(child, "task"))
            .await
            .unwrap();
        let follow = turn("p", "[System message] done");
        let first = store
            .finish_subagent(child, &[seq], Some(("d1", &follow)))
            .await
            .unwrap();
        assert!(first.is_some());
        // Settling again (a repeated run after a crash) queues nothing more.
        let again = store
            .finish_subagent(child, &[seq], Some(("d1", &follow)))
            .await
            .unwrap();
        assert_eq!(again, None);
        let pending = store.all_pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].1.session_key, "p");
        assert_eq!(
            store.subagent(child).unwrap().unwrap().state,
            SubagentState::Done
        );
    }

    #[tokio::test]
    async fn a_stopped_child_reports_nothing_to_its_parent() {
        let store = Store::temporary().unwrap();
        let seq = store
            .spawn_subagent("c1", &link("p", 1), &turn("c1", "task"))
            .await
            .unwrap();
        assert!(store.stop_subagent("c1").unwrap());
        assert!(!store.stop_subagent("c1").unwrap());
        let follow = turn("p", "x");
        let queued = store
            .finish_subagent("c1", &[seq], Some(("d1", &follow)))
            .await
            .unwrap();
        assert_eq!(queued, None);
        assert!(store.all_pending().unwrap().is_empty());
        assert!(!store.stop_subagent("c1").unwrap());
    }
}
