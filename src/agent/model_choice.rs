//! A session's model choice (`/model NAME`, `NAME` a model of the agent's provider or
//! `provider/model`): kept in the store so it survives restarts, read at the start of each
//! run; the agent's fallbacks still follow it. Compaction summaries use the configured model.
//! Also the session's last fallback (which model answered instead of which, and why), for
//! `/status`: written only when a call fell back.

use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

fn thinking_record(key: &str) -> String {
    format!("thinking:{key}")
}

/// How much session `key`'s model reasons, when the session chose (`/think`); a store
/// failure counts as no choice.
pub fn thinking(store: &Store, key: &str) -> Option<crate::config::Thinking> {
    store.get_settings(&thinking_record(key)).ok().flatten()
}

/// Sets how much session `key`'s model reasons, or back to `[model] thinking` with `None`.
pub fn set_thinking(
    store: &Store,
    key: &str,
    level: Option<crate::config::Thinking>,
) -> Result<(), StoreError> {
    match level {
        Some(level) => store.put_settings(&thinking_record(key), &level),
        None => store.clear_settings(&thinking_record(key)),
    }
}

fn reasoning_record(key: &str) -> String {
    format!("reasoning:{key}")
}

/// Whether session `key`'s chat shows the model's reasoning (`/reasoning on`).
pub fn reasoning_shown(store: &Store, key: &str) -> bool {
    store
        .get_settings::<bool>(&reasoning_record(key))
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Shows session `key`'s reasoning (`Some(true)`), or back to not showing it (`None`).
pub fn show_reasoning(store: &Store, key: &str, shown: Option<bool>) -> Result<(), StoreError> {
    match shown {
        Some(shown) => store.put_settings(&reasoning_record(key), &shown),
        None => store.clear_settings(&reasoning_record(key)),
    }
}

/// A call of a session that another model answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    /// `provider/model` that answered.
    pub answered: String,
    /// Each model skipped, with why.
    pub skipped: Vec<String>,
    /// When, ms since the epoch.
    pub at_ms: u64,
}

fn fallback_record(key: &str) -> String {
    format!("model-fallback:{key}")
}

/// Notes that `fallback` happened in session `key` (a store failure is logged).
pub fn note_fallback(store: &Store, key: &str, fallback: &Fallback) {
    if let Err(e) = store.put_settings(&fallback_record(key), fallback) {
        tracing::warn!(error = %e, session = key, "cannot note the session's fallback");
    }
}

/// Session `key`'s last fallback, if any (a store failure counts as none).
pub fn last_fallback(store: &Store, key: &str) -> Option<Fallback> {
    store.get_settings(&fallback_record(key)).ok().flatten()
}

/// The settings-tree record holding session `key`'s choice.
fn record(key: &str) -> String {
    format!("model-choice:{key}")
}

/// The model session `key` chose, if any (a store failure counts as none, logged).
pub fn chosen(store: &Store, key: &str) -> Option<String> {
    match store.get_settings::<String>(&record(key)) {
        Ok(choice) => choice,
        Err(e) => {
            tracing::warn!(error = %e, session = key, "cannot read the session's model choice");
            None
        }
    }
}

/// Sets session `key`'s model to `model`, or back to the configured one with `None`.
pub fn choose(store: &Store, key: &str, model: Option<&str>) -> Result<(), StoreError> {
    match model {
        Some(model) => store.put_settings(&record(key), &model.to_owned()),
        None => store.clear_settings(&record(key)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_is_per_session_and_can_be_cleared() {
        let store = Store::temporary().unwrap();
        assert_eq!(chosen(&store, "a"), None);
        choose(&store, "a", Some("gpt-5")).unwrap();
        assert_eq!(chosen(&store, "a").as_deref(), Some("gpt-5"));
        assert_eq!(chosen(&store, "b"), None);
        choose(&store, "a", None).unwrap();
        assert_eq!(chosen(&store, "a"), None);
    }

    #[test]
    fn the_last_fallback_is_kept_per_session() {
        let store = Store::temporary().unwrap();
        assert_eq!(last_fallback(&store, "a"), None);
        let fallback = Fallback {
            answered: "b/m2".into(),
            skipped: vec!["a/m1: rate limited (429)".into()],
            at_ms: 5,
        };
        note_fallback(&store, "a", &fallback);
        assert_eq!(last_fallback(&store, "a"), Some(fallback));
        assert_eq!(last_fallback(&store, "b"), None);
    }
}
