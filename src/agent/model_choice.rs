//! A session's model choice (`/model NAME`): kept in the store so it survives restarts, read
//! at the start of each run. The provider stays the configured one; only the model name
//! changes. Compaction summaries use the configured model.

use crate::store::{Store, StoreError};

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
}
