//! Where intake stands: platform cursors and the kept context of group chats.

use super::StoreFuture;
use crate::store::error::StoreError;

/// Platform cursors (name -> i64, e.g. `telegram:<account>:offset`), which only move past
/// messages that are durable, and the recent unmentioned lines of each group session (session
/// key -> lines, oldest first), kept so a restart does not lose the context of the next
/// mentioned turn. Group lines are buffered; the cursor's flush carries them.
pub trait CursorStore {
    /// The cursor called `name`, if set.
    fn get_cursor(&self, name: &str) -> Result<Option<i64>, StoreError>;

    /// Every cursor whose name ends with `suffix`, by name.
    fn cursors_ending(&self, suffix: &str) -> Result<Vec<(String, i64)>, StoreError>;

    /// Every cursor whose name starts with `prefix`, by name.
    fn cursors_starting(&self, prefix: &str) -> Result<Vec<(String, i64)>, StoreError>;

    /// Sets the cursor called `name`. Durable, together with every write that returned before.
    fn set_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()>;

    /// Sets the cursor called `name` to `value` unless it holds a larger one (atomically: a
    /// cursor that only moves forward, whichever of several writers comes last). Durable as
    /// [`set_cursor`](CursorStore::set_cursor).
    fn raise_cursor<'a>(&'a self, name: &'a str, value: i64) -> StoreFuture<'a, ()>;

    /// Replaces the kept lines of group session `key`. Buffered.
    fn save_group_history(&self, key: &str, lines: &[String]) -> Result<(), StoreError>;

    /// Forgets the kept lines of group session `key`. Buffered.
    fn clear_group_history(&self, key: &str) -> Result<(), StoreError>;

    /// Every group's kept lines, by session key.
    fn group_histories(&self) -> Result<Vec<(String, Vec<String>)>, StoreError>;

    /// Appends `line` to the kept lines of group session `key`, keeping the newest
    /// `per_group`, and forgets the least recently touched groups beyond `groups`: what a
    /// cluster's nodes use to share the context, so a store shared by several processes
    /// does it atomically. Buffered. This default, for stores one process
    /// holds, neither is atomic nor keeps the groups' cap (that process keeps it in memory).
    fn append_group_line(
        &self,
        key: &str,
        line: &str,
        per_group: usize,
        groups: usize,
    ) -> Result<(), StoreError> {
        let _ = groups;
        let mut lines = self
            .group_histories()?
            .into_iter()
            .find_map(|(k, lines)| (k == key).then_some(lines))
            .unwrap_or_default();
        lines.push(line.to_owned());
        let over = lines.len().saturating_sub(per_group);
        lines.drain(..over);
        self.save_group_history(key, &lines)
    }

    /// Returns the kept lines of group session `key` and forgets them; of several processes
    /// taking at once, one gets them. Buffered.
    fn take_group_history(&self, key: &str) -> Result<Vec<String>, StoreError> {
        let lines = self
            .group_histories()?
            .into_iter()
            .find_map(|(k, lines)| (k == key).then_some(lines))
            .unwrap_or_default();
        self.clear_group_history(key)?;
        Ok(lines)
    }
}
