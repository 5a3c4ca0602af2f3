//! Interactions awaiting their answer: the token Discord gave with each (kept in memory only,
//! never in the store, since it is a credential) and whether the answer has begun. Bounded:
//! tokens live 15 minutes on Discord, and older entries are forgotten.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long Discord accepts an interaction token.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Entries kept at most (the oldest go first).
const MAX_ENTRIES: usize = 10_000;

struct Entry {
    token: String,
    since: Instant,
    answered: bool,
}

/// What the adapter needs to answer an interaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerable {
    /// The interaction token.
    pub token: String,
    /// True once a first part was delivered: later parts are follow-ups.
    pub answered: bool,
}

/// Interaction tokens by interaction id.
#[derive(Default)]
pub struct Pending {
    entries: Mutex<HashMap<u64, Entry>>,
}

impl Pending {
    /// Remembers the token of interaction `id` (a second delivery changes nothing); true
    /// the first time.
    pub fn remember(&self, id: u64, token: String) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let now = Instant::now();
        entries.retain(|_, e| now.duration_since(e.since) < TOKEN_LIFETIME);
        if entries.len() >= MAX_ENTRIES
            && let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.since).map(|(k, _)| *k)
        {
            entries.remove(&oldest);
        }
        // A redelivered interaction keeps what its first delivery began.
        let first = !entries.contains_key(&id);
        entries.entry(id).or_insert(Entry {
            token,
            since: now,
            answered: false,
        });
        first
    }

    /// The token of interaction `id`, while Discord still takes it.
    pub fn get(&self, id: u64) -> Option<Answerable> {
        let entries = self.entries.lock().ok()?;
        entries
            .get(&id)
            .filter(|e| e.since.elapsed() < TOKEN_LIFETIME)
            .map(|e| Answerable {
                token: e.token.clone(),
                answered: e.answered,
            })
    }

    /// Records that a part of the answer to `id` was delivered.
    pub fn mark_answered(&self, id: u64) {
        if let Ok(mut entries) = self.entries.lock()
            && let Some(entry) = entries.get_mut(&id)
        {
            entry.answered = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_first_part_edits_later_parts_follow() {
        let pending = Pending::default();
        assert!(pending.remember(1, "tok".into()));
        assert!(!pending.remember(1, "again".into()), "taken once");
        assert_eq!(
            pending.get(1),
            Some(Answerable {
                token: "tok".into(),
                answered: false
            })
        );
        pending.mark_answered(1);
        assert!(pending.get(1).is_some_and(|a| a.answered));
        assert_eq!(pending.get(2), None);
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_expire_with_discords_lifetime() {
        let pending = Pending::default();
        pending.remember(1, "old".into());
        tokio::time::advance(TOKEN_LIFETIME + Duration::from_secs(1)).await;
        assert_eq!(pending.get(1), None);
        pending.remember(2, "new".into());
        assert!(pending.entries.lock().unwrap().get(&1).is_none(), "pruned");
        assert!(pending.get(2).is_some());
    }
}
