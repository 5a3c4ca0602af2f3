//! Platform cursors (`cursors`: name -> big-endian i64) and kept group context
//! (`group_history`: key -> JSON lines).

use super::{CURSORS, GROUP_HISTORY, RedbStore, db_err, get};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{CursorStore, StoreFuture};

/// Decodes a stored cursor.
fn cursor(bytes: &[u8]) -> Result<i64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        collection: "cursors",
        reason: format!("expected 8 bytes, found {}", bytes.len()),
    })?;
    Ok(i64::from_be_bytes(arr))
}

impl CursorStore for RedbStore {
    fn get_cursor(&self, name: &str) -> Result<Option<i64>, StoreError> {
        self.get(CURSORS, name.as_bytes())?
            .map(|v| cursor(&v))
            .transpose()
    }

    fn cursors_ending(&self, suffix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        let mut out = self.cursors_starting("")?;
        out.retain(|(name, _)| name.ends_with(suffix));
        Ok(out)
    }

    fn cursors_starting(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError> {
        self.scan(CURSORS, prefix.as_bytes())?
            .iter()
            .map(|(k, v)| Ok((String::from_utf8_lossy(k).into_owned(), cursor(v)?)))
            .collect()
    }

    fn set_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.insert(CURSORS, name.as_bytes(), &value.to_be_bytes())?;
            self.sync().await
        })
    }

    fn raise_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.write(|tx| {
                let mut table = tx.open_table(CURSORS).map_err(db_err)?;
                let old = get(&table, name.as_bytes())?;
                if old
                    .map(|old| cursor(&old))
                    .transpose()?
                    .is_none_or(|old| old < value)
                {
                    table
                        .insert(name.as_bytes(), &value.to_be_bytes()[..])
                        .map_err(db_err)?;
                }
                Ok(())
            })?;
            self.sync().await
        })
    }

    fn save_group_history(&self, key: &str, lines: &[String]) -> Result<(), StoreError> {
        self.insert(GROUP_HISTORY, key.as_bytes(), &encode(lines)?)
    }

    fn clear_group_history(&self, key: &str) -> Result<(), StoreError> {
        self.remove(GROUP_HISTORY, key.as_bytes()).map(|_| ())
    }

    fn group_histories(&self) -> Result<Vec<(String, Vec<String>)>, StoreError> {
        self.scan(GROUP_HISTORY, &[])?
            .iter()
            .map(|(k, v)| {
                let lines: Vec<String> = decode("group_history", v)?;
                Ok((String::from_utf8_lossy(k).into_owned(), lines))
            })
            .collect()
    }
}
