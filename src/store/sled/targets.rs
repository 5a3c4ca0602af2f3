//! Where each session last replied (session key -> [`Conversation`]), so chela's agent can
//! message a session it is not running in (the `message` tool).

use chela_channel::Conversation;

use super::{SledStore, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;

impl SledStore {
    /// Remembers that session `key` replies into `to` (not flushed: it is a hint).
    pub(super) fn write_target(&self, key: &str, to: &Conversation) -> Result<(), StoreError> {
        if self.read_target(key)?.as_ref() == Some(to) {
            return Ok(());
        }
        let bytes = encode(to)?;
        self.inner.targets.insert(key, bytes).map_err(db_err)?;
        Ok(())
    }

    /// Where session `key` last replied, if it ever did.
    pub(super) fn read_target(&self, key: &str) -> Result<Option<Conversation>, StoreError> {
        match self.inner.targets.get(key).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("targets", &bytes)?)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::store::Store;
    use chela_channel::ChatKind;

    #[test]
    fn targets_are_remembered_per_session() {
        let store = Store::temporary().unwrap();
        let to = Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: "42".into(),
            thread_id: None,
        };
        assert_eq!(store.target("k").unwrap(), None);
        store.set_target("k", &to).unwrap();
        store.set_target("k", &to).unwrap();
        assert_eq!(store.target("k").unwrap(), Some(to));
    }
}
