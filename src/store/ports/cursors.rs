//! Where intake stands: platform cursors and the kept context of group chats.

use super::StoreFuture;
use crate::store::StoreError;

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

    /// Replaces the kept lines of group session `key`. Buffered.
    fn save_group_history(&self, key: &str, lines: &[String]) -> Result<(), StoreError>;

    /// Forgets the kept lines of group session `key`. Buffered.
    fn clear_group_history(&self, key: &str) -> Result<(), StoreError>;

    /// Every group's kept lines, by session key.
    fn group_histories(&self) -> Result<Vec<(String, Vec<String>)>, StoreError>;
}
