//! Recent unmentioned group messages (session key -> their lines, oldest first), kept so a
//! restart does not lose the context of the next mentioned turn. Written through by the router;
//! not flushed on their own (the channel cursor's flush carries them).

use super::{SledStore, db_err};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;

impl SledStore {
    /// Replaces the kept lines of group session `key`.
    pub(super) fn write_group_lines(&self, key: &str, lines: &[String]) -> Result<(), StoreError> {
        let bytes = encode(lines)?;
        self.inner
            .group_history
            .insert(key, bytes)
            .map_err(db_err)?;
        Ok(())
    }

    /// Forgets the kept lines of group session `key`.
    pub(super) fn drop_group_lines(&self, key: &str) -> Result<(), StoreError> {
        self.inner.group_history.remove(key).map_err(db_err)?;
        Ok(())
    }

    /// Every group's kept lines.
    pub(super) fn read_group_lines(&self) -> Result<Vec<(String, Vec<String>)>, StoreError> {
        self.inner
            .group_history
            .iter()
            .map(|kv| {
                let (k, v) = kv.map_err(db_err)?;
                let lines: Vec<String> = decode("group_history", &v)?;
                Ok((String::from_utf8_lossy(&k).into_owned(), lines))
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::store::Store;

    #[test]
    fn lines_are_saved_replaced_and_cleared_per_group() {
        let store = Store::temporary().unwrap();
        store.save_group_history("g1", &["a: hi".into()]).unwrap();
        store
            .save_group_history("g1", &["a: hi".into(), "b: yo".into()])
            .unwrap();
        store.save_group_history("g2", &["c: x".into()]).unwrap();
        let all = store.group_histories().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], ("g1".into(), vec!["a: hi".into(), "b: yo".into()]));
        store.clear_group_history("g1").unwrap();
        assert_eq!(store.group_histories().unwrap().len(), 1);
    }
}
