//! A session's voice replies (`/tts on|off`, docs/voice.md): kept in the store's settings so
//! they survive restarts, read by the outbox for each final of the session.

use crate::config::TtsDefault;
use crate::store::{Store, StoreError};

/// The settings record of session `key`'s choice.
fn record(key: &str) -> String {
    format!("tts:{key}")
}

/// Whether session `key` chose voice replies on (`Some(true)`) or off; `None`: it did not
/// choose (a store failure counts as no choice, logged).
pub fn chosen(store: &Store, key: &str) -> Option<bool> {
    match store.get_settings::<bool>(&record(key)) {
        Ok(choice) => choice,
        Err(e) => {
            tracing::warn!(error = %e, session = key, "cannot read the session's voice replies");
            None
        }
    }
}

/// Sets session `key`'s voice replies on or off, or back to `[tts] default` with `None`.
pub fn choose(store: &Store, key: &str, on: Option<bool>) -> Result<(), StoreError> {
    match on {
        Some(on) => store.put_settings(&record(key), &on),
        None => store.clear_settings(&record(key)),
    }
}

/// Whether session `key` gets voice replies: its choice, else `default`.
pub fn is_on(store: &Store, key: &str, default: TtsDefault) -> bool {
    chosen(store, key).unwrap_or(default == TtsDefault::On)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_is_per_session_and_falls_back_to_the_default() {
        let store = Store::temporary().unwrap();
        assert!(!is_on(&store, "a", TtsDefault::Off));
        assert!(is_on(&store, "a", TtsDefault::On));
        choose(&store, "a", Some(true)).unwrap();
        assert!(is_on(&store, "a", TtsDefault::Off));
        assert_eq!(chosen(&store, "b"), None);
        choose(&store, "b", Some(false)).unwrap();
        assert!(!is_on(&store, "b", TtsDefault::On));
        choose(&store, "a", None).unwrap();
        assert_eq!(chosen(&store, "a"), None);
    }
}
