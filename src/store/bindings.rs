//! Thread bindings (SPEC 4): which conversation talks to which coding-agent session.
//!
//! A binding is keyed by the session key of the bound conversation, so the lane of that key
//! runs its turns. It survives restarts: the ACP session id lets the next message resume the
//! agent's session with `session/load`.

use std::path::PathBuf;

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, db_err, decode, encode};

/// One conversation bound to a coding agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Session key of the bound conversation.
    pub session_key: String,
    /// Where the conversation lives (replies go there).
    pub conversation: Conversation,
    /// Harness name (`codex`, `claude`, a custom entry...).
    pub harness: String,
    /// The agent's working folder.
    pub cwd: PathBuf,
    /// The agent's session id, once `session/new` answered.
    pub acp_session_id: Option<String>,
    /// A label for `/acp status`.
    pub label: Option<String>,
    /// Who spawned it (`channel:user id`).
    pub owner: String,
    /// Creation time, ms since the epoch.
    pub created_ms: u64,
    /// Last turn or command, ms since the epoch (idle bindings expire).
    pub last_active_ms: u64,
    /// Idle seconds before this binding expires (`/session idle`); `None`: the config's.
    #[serde(default)]
    pub idle_s: Option<u64>,
}

impl Store {
    /// The binding of session `key`, if it is bound.
    pub fn get_binding(&self, key: &str) -> Result<Option<Binding>, StoreError> {
        match self.inner.bindings.get(key).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("bindings", &bytes)?)),
            None => Ok(None),
        }
    }

    /// Saves `binding` and flushes, so it survives a crash right after.
    pub async fn put_binding(&self, binding: &Binding) -> Result<(), StoreError> {
        let bytes = encode(binding)?;
        self.inner
            .bindings
            .insert(binding.session_key.as_str(), bytes)
            .map_err(db_err)?;
        self.flush().await
    }

    /// Removes the binding of session `key`; returns it if there was one.
    pub async fn remove_binding(&self, key: &str) -> Result<Option<Binding>, StoreError> {
        let old = self.inner.bindings.remove(key).map_err(db_err)?;
        self.flush().await?;
        old.map(|bytes| decode("bindings", &bytes)).transpose()
    }

    /// Every binding, in key order.
    pub fn list_bindings(&self) -> Result<Vec<Binding>, StoreError> {
        self.inner
            .bindings
            .iter()
            .map(|kv| {
                let (_, v) = kv.map_err(db_err)?;
                decode("bindings", &v)
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
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
