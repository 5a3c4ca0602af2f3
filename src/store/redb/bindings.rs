//! Coding-agent bindings (`bindings`: session key -> [`Binding`]), sub-agent links
//! (`subagents`: child key -> [`SubagentLink`]) and reply targets (`targets`: session key ->
//! [`Conversation`]).

use chela_channel::Conversation;

use super::queue::{mark_new, put};
use super::{BINDINGS, PENDING, RedbStore, SUBAGENTS, TARGETS, db_err, get, next_id};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{
    Binding, BindingStore, PendingTurn, StoreFuture, SubagentLink, SubagentState,
};

impl BindingStore for RedbStore {
    fn get_binding(&self, key: &str) -> Result<Option<Binding>, StoreError> {
        self.get(BINDINGS, key.as_bytes())?
            .map(|bytes| decode("bindings", &bytes))
            .transpose()
    }

    fn put_binding<'a>(&'a self, binding: &'a Binding) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.insert(BINDINGS, binding.session_key.as_bytes(), &encode(binding)?)?;
            self.sync().await
        })
    }

    fn remove_binding<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Binding>> {
        Box::pin(async move {
            let old = self.remove(BINDINGS, key.as_bytes())?;
            self.sync().await?;
            old.map(|bytes| decode("bindings", &bytes)).transpose()
        })
    }

    fn list_bindings(&self) -> Result<Vec<Binding>, StoreError> {
        self.scan(BINDINGS, &[])?
            .iter()
            .map(|(_, v)| decode("bindings", v))
            .collect()
    }

    /// The link and the child's first turn in one transaction, then a flush.
    fn spawn_subagent<'a>(
        &'a self,
        child: &'a str,
        link: &'a SubagentLink,
        first: &'a PendingTurn,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let (link_bytes, turn_bytes) = (encode(link)?, encode(first)?);
            let seq = self.write(|tx| {
                let seq = next_id(tx)?;
                put(tx, SUBAGENTS, child.as_bytes(), &link_bytes)?;
                put(tx, PENDING, &seq.to_be_bytes(), &turn_bytes)?;
                Ok(seq)
            })?;
            self.sync().await?;
            Ok(seq)
        })
    }

    fn subagent(&self, child: &str) -> Result<Option<SubagentLink>, StoreError> {
        self.get(SUBAGENTS, child.as_bytes())?
            .map(|bytes| decode("subagents", &bytes))
            .transpose()
    }

    fn subagents_of(&self, parent: &str) -> Result<Vec<(String, SubagentLink)>, StoreError> {
        let mut out = Vec::new();
        for (k, v) in self.scan(SUBAGENTS, &[])? {
            let link: SubagentLink = decode("subagents", &v)?;
            if link.parent == parent {
                out.push((String::from_utf8_lossy(&k).into_owned(), link));
            }
        }
        out.sort_by_key(|(_, link)| link.created_ms);
        Ok(out)
    }

    /// Running -> stopped; false when the child is unknown or not running.
    fn stop_subagent(&self, child: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            let mut table = tx.open_table(SUBAGENTS).map_err(db_err)?;
            let Some(bytes) = get(&table, child.as_bytes())? else {
                return Ok(false);
            };
            let mut link: SubagentLink = decode("subagents", &bytes)?;
            if link.state != SubagentState::Running {
                return Ok(false);
            }
            link.state = SubagentState::Stopped;
            table
                .insert(child.as_bytes(), encode(&link)?.as_slice())
                .map_err(db_err)?;
            Ok(true)
        })
    }

    fn finish_subagent<'a>(
        &'a self,
        child: &'a str,
        seqs: &'a [u64],
        follow_up: Option<(&'a str, &'a PendingTurn)>,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(self.finish_subagent_now(child, seqs, follow_up))
    }

    fn set_target(&self, key: &str, to: &Conversation) -> Result<(), StoreError> {
        if self.target(key)?.as_ref() == Some(to) {
            return Ok(());
        }
        self.insert(TARGETS, key.as_bytes(), &encode(to)?)
    }

    fn target(&self, key: &str) -> Result<Option<Conversation>, StoreError> {
        self.get(TARGETS, key.as_bytes())?
            .map(|bytes| decode("targets", &bytes))
            .transpose()
    }
}

impl RedbStore {
    /// [`BindingStore::finish_subagent`]: clears the child's turns `seqs`, marks it done and,
    /// when it was still running and `follow_up`'s dedupe key is new, queues the report to
    /// the parent, all in one transaction; then a flush.
    async fn finish_subagent_now(
        &self,
        child: &str,
        seqs: &[u64],
        follow_up: Option<(&str, &PendingTurn)>,
    ) -> Result<Option<u64>, StoreError> {
        let turn = match follow_up {
            Some((dedupe_key, turn)) => Some((dedupe_key, encode(turn)?)),
            None => None,
        };
        let queued = self.write(|tx| {
            {
                let mut pending = tx.open_table(PENDING).map_err(db_err)?;
                for s in seqs {
                    pending.remove(&s.to_be_bytes()[..]).map_err(db_err)?;
                }
            }
            let mut subagents = tx.open_table(SUBAGENTS).map_err(db_err)?;
            let Some(bytes) = get(&subagents, child.as_bytes())? else {
                return Err(StoreError::UnknownSession(child.to_owned()));
            };
            let mut link: SubagentLink = decode("subagents", &bytes)?;
            if link.state == SubagentState::Done {
                return Ok(None);
            }
            let report = link.state == SubagentState::Running;
            link.state = SubagentState::Done;
            subagents
                .insert(child.as_bytes(), encode(&link)?.as_slice())
                .map_err(db_err)?;
            let Some((dedupe_key, bytes)) = turn.as_ref().filter(|_| report) else {
                return Ok(None);
            };
            if !mark_new(tx, dedupe_key, super::now_ms())? {
                return Ok(None);
            }
            let seq = next_id(tx)?;
            put(tx, PENDING, &seq.to_be_bytes(), bytes)?;
            Ok(Some(seq))
        });
        // An unknown child aborted the transaction (the seqs stay): as in the sled backend.
        let queued = queued?;
        self.sync().await?;
        Ok(queued)
    }
}
