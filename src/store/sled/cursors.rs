//! Platform cursors (e.g. the Telegram update offset): name -> i64 big-endian.

use super::{SledStore, db_err};
use crate::store::error::StoreError;
use crate::store::ports::{CursorStore, StoreFuture};

impl CursorStore for SledStore {
    /// The cursor called `name`, if set.
    fn get_cursor(&self, name: &str) -> Result<Option<i64>, StoreError> {
        let Some(v) = self.inner.cursors.get(name).map_err(db_err)? else {
            return Ok(None);
        };
        let arr: [u8; 8] = v.as_ref().try_into().map_err(|_| StoreError::Corrupt {
            collection: "cursors",
            reason: format!("expected 8 bytes, found {}", v.len()),
        })?;
        Ok(Some(i64::from_be_bytes(arr)))
    }

    /// Every cursor whose name ends with `suffix`, by name.
    fn cursors_ending(&self, suffix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.inner.cursors.iter() {
            let (key, _) = kv.map_err(db_err)?;
            let name = String::from_utf8_lossy(&key).into_owned();
            if name.ends_with(suffix)
                && let Some(value) = self.get_cursor(&name)?
            {
                out.push((name, value));
            }
        }
        Ok(out)
    }

    /// Every cursor whose name starts with `prefix`, by name.
    fn cursors_starting(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let mut out = Vec::new();
        for kv in self.inner.cursors.scan_prefix(prefix) {
            let (key, _) = kv.map_err(db_err)?;
            let name = String::from_utf8_lossy(&key).into_owned();
            if let Some(value) = self.get_cursor(&name)? {
                out.push((name, value));
            }
        }
        Ok(out)
    }

    /// Sets the cursor called `name`; returns once it is on disk.
    fn set_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.inner
                .cursors
                .insert(name, &value.to_be_bytes()[..])
                .map_err(db_err)?;
            self.sync().await
        })
    }

    /// Raises the cursor called `name` to `value` (an unreadable one is replaced); returns
    /// once it is on disk.
    fn raise_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.inner
                .cursors
                .fetch_and_update(name, |old| {
                    let old = old.and_then(|b| <[u8; 8]>::try_from(b).ok());
                    let kept = old.map(i64::from_be_bytes).filter(|old| *old > value);
                    Some(kept.unwrap_or(value).to_be_bytes().to_vec())
                })
                .map_err(db_err)?;
            self.sync().await
        })
    }

    fn save_group_history(&self, key: &str, lines: &[String]) -> Result<(), StoreError> {
        self.write_group_lines(key, lines)
    }

    fn clear_group_history(&self, key: &str) -> Result<(), StoreError> {
        self.drop_group_lines(key)
    }

    fn group_histories(&self) -> Result<Vec<(String, Vec<String>)>, StoreError> {
        self.read_group_lines()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::store::Store;

    #[tokio::test]
    async fn cursors_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.get_cursor("telegram:default").unwrap(), None);
            store.set_cursor("telegram:default", 41).await.unwrap();
            store.set_cursor("telegram:default", -7).await.unwrap();
            store.set_cursor("telegram:other", i64::MAX).await.unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.cursors_starting("telegram:o").unwrap(),
            vec![("telegram:other".to_owned(), i64::MAX)]
        );
        assert_eq!(store.get_cursor("telegram:default").unwrap(), Some(-7));
        assert_eq!(store.get_cursor("telegram:other").unwrap(), Some(i64::MAX));
    }
}
