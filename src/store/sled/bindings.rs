//! Thread bindings (SPEC 4): which conversation talks to which coding-agent session.
//!
//! A binding is keyed by the session key of the bound conversation, so the lane of that key
//! runs its turns. It survives restarts: the ACP session id lets the next message resume the
//! agent's session with `session/load`.

use chela_channel::Conversation;

use super::{SledStore, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{Binding, BindingStore, PendingTurn, StoreFuture, SubagentLink};

impl BindingStore for SledStore {
    /// The binding of session `key`, if it is bound.
    fn get_binding(&self, key: &str) -> Result<Option<Binding>, StoreError> {
        match self.inner.bindings.get(key).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("bindings", &bytes)?)),
            None => Ok(None),
        }
    }

    /// Saves `binding` and flushes, so it survives a crash right after.
    fn put_binding<'a>(&'a self, binding: &'a Binding) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let bytes = encode(binding)?;
            self.inner
                .bindings
                .insert(binding.session_key.as_str(), bytes)
                .map_err(db_err)?;
            self.sync().await
        })
    }

    /// Removes the binding of session `key`; returns it if there was one.
    fn remove_binding<'a>(&'a self, key: &'a str) -> StoreFuture<'a, Option<Binding>> {
        Box::pin(async move {
            let old = self.inner.bindings.remove(key).map_err(db_err)?;
            self.sync().await?;
            old.map(|bytes| decode("bindings", &bytes)).transpose()
        })
    }

    /// Every binding, in key order.
    fn list_bindings(&self) -> Result<Vec<Binding>, StoreError> {
        self.inner
            .bindings
            .iter()
            .map(|kv| {
                let (_, v) = kv.map_err(db_err)?;
                decode("bindings", &v)
            })
            .collect()
    }

    fn spawn_subagent<'a>(
        &'a self,
        child: &'a str,
        link: &'a SubagentLink,
        first: &'a PendingTurn,
    ) -> StoreFuture<'a, u64> {
        Box::pin(self.spawn_subagent_now(child, link, first))
    }

    fn subagent(&self, child: &str) -> Result<Option<SubagentLink>, StoreError> {
        self.read_subagent(child)
    }

    fn subagents_of(&self, parent: &str) -> Result<Vec<(String, SubagentLink)>, StoreError> {
        self.children_of(parent)
    }

    fn stop_subagent(&self, child: &str) -> Result<bool, StoreError> {
        self.stop_child(child)
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
        self.write_target(key, to)
    }

    fn target(&self, key: &str) -> Result<Option<Conversation>, StoreError> {
        self.read_target(key)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::store::Store;
    use chela_channel::ChatKind;

    fn binding(key: &str) -> Binding {
        Binding {
            session_key: key.into(),
            conversation: Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: ChatKind::Group,
                chat_id: "-100".into(),
                thread_id: Some("7".into()),
            },
            harness: "codex".into(),
            cwd: PathBuf::from("/work"),
            acp_session_id: Some("s-1".into()),
            label: None,
            owner: "telegram:1".into(),
            created_ms: 1,
            last_active_ms: 2,
            idle_s: None,
        }
    }

    #[tokio::test]
    async fn bindings_round_trip_and_remove() {
        let store = Store::temporary().unwrap();
        assert!(store.get_binding("k").unwrap().is_none());
        store.put_binding(&binding("k")).await.unwrap();
        store.put_binding(&binding("j")).await.unwrap();
        assert_eq!(store.get_binding("k").unwrap(), Some(binding("k")));
        assert_eq!(store.list_bindings().unwrap().len(), 2);
        assert_eq!(store.remove_binding("k").await.unwrap(), Some(binding("k")));
        assert!(store.get_binding("k").unwrap().is_none());
        assert_eq!(store.remove_binding("k").await.unwrap(), None);
    }
}
