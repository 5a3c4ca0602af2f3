//! The messages the agent sent through the `message` tool, per conversation: what its
//! `edit` and `delete` actions may touch (docs/tools.md). Kept in the store as settings (JSON
//! under one `chela:own-messages:` key per conversation, on every engine), the newest
//! [`MAX_KEPT`] of each conversation, so a later run may still edit what an earlier one sent.
//! Each id is kept with what it is (text or a poll, which cannot be edited) and the session
//! whose run sent it: only that session's runs may edit or delete it (a group member's run
//! does not touch what the owner's run posted into the group).

use std::sync::Mutex;

use chela_channel::Conversation;
use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

/// Most messages remembered per conversation (the oldest are forgotten first).
const MAX_KEPT: usize = 500;

/// Serializes the read-modify-write of a conversation's list in this process (two runs
/// sending into one conversation at once).
static NOTING: Mutex<()> = Mutex::new(());

/// What a message the agent sent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum OwnKind {
    /// Text: it may be edited and deleted.
    Text,
    /// A native poll: deleted, never edited.
    Poll,
}

/// One message the agent sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OwnMessage {
    /// The platform message id.
    id: String,
    /// What it is.
    kind: OwnKind,
    /// The session whose run sent it.
    #[serde(default)]
    session: String,
}

/// The settings key of `to`'s list.
fn key(to: &Conversation) -> String {
    let thread = to
        .thread_id
        .as_deref()
        .map(|t| format!(":{t}"))
        .unwrap_or_default();
    format!(
        "chela:own-messages:{}:{}:{}{thread}",
        to.channel, to.account, to.chat_id
    )
}

fn load(store: &Store, to: &Conversation) -> Result<Vec<OwnMessage>, StoreError> {
    Ok(store.get_settings(&key(to))?.unwrap_or_default())
}

/// Notes that a run of session `session` sent messages `ids` (of `kind`) into `to`.
/// Buffered: made durable by the store's next flush.
pub(super) fn note(
    store: &Store,
    to: &Conversation,
    ids: &[String],
    kind: OwnKind,
    session: &str,
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let _noting = NOTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut kept = load(store, to)?;
    kept.retain(|m| !ids.contains(&m.id));
    kept.extend(ids.iter().map(|id| OwnMessage {
        id: id.clone(),
        kind,
        session: session.to_owned(),
    }));
    let extra = kept.len().saturating_sub(MAX_KEPT);
    kept.drain(..extra);
    store.put_settings(&key(to), &kept)
}

/// What message `id` of `to` is, if a run of session `session` sent it (and it is still
/// remembered).
pub(super) fn find(
    store: &Store,
    to: &Conversation,
    id: &str,
    session: &str,
) -> Result<Option<OwnKind>, StoreError> {
    Ok(load(store, to)?
        .into_iter()
        .find(|m| m.id == id && m.session == session)
        .map(|m| m.kind))
}

/// Forgets message `id` of `to` (deleted).
pub(super) fn forget(store: &Store, to: &Conversation, id: &str) -> Result<(), StoreError> {
    let _noting = NOTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut kept = load(store, to)?;
    kept.retain(|m| m.id != id);
    match kept.is_empty() {
        true => store.clear_settings(&key(to)),
        false => store.put_settings(&key(to), &kept),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chela_channel::ChatKind;

    fn chat(thread: Option<&str>) -> Conversation {
        Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: ChatKind::Group,
            chat_id: "-100".into(),
            thread_id: thread.map(str::to_owned),
        }
    }

    #[test]
    fn sent_messages_are_known_per_conversation_until_forgotten() {
        let store = Store::temporary().unwrap();
        let (general, topic) = (chat(None), chat(Some("7")));
        note(
            &store,
            &general,
            &["1".into(), "2".into()],
            OwnKind::Text,
            "s",
        )
        .unwrap();
        note(&store, &general, &["3".into()], OwnKind::Poll, "s").unwrap();
        assert_eq!(
            find(&store, &general, "2", "s").unwrap(),
            Some(OwnKind::Text)
        );
        assert_eq!(
            find(&store, &general, "3", "s").unwrap(),
            Some(OwnKind::Poll)
        );
        assert_eq!(find(&store, &general, "4", "s").unwrap(), None);
        assert_eq!(
            find(&store, &topic, "1", "s").unwrap(),
            None,
            "another topic"
        );
        assert_eq!(
            find(&store, &general, "1", "other").unwrap(),
            None,
            "another session"
        );
        forget(&store, &general, "2").unwrap();
        assert_eq!(find(&store, &general, "2", "s").unwrap(), None);
        assert_eq!(
            find(&store, &general, "1", "s").unwrap(),
            Some(OwnKind::Text)
        );
    }

    #[test]
    fn only_the_newest_are_kept() {
        let store = Store::temporary().unwrap();
        let to = chat(None);
        let ids: Vec<String> = (0..MAX_KEPT + 3).map(|i| i.to_string()).collect();
        note(&store, &to, &ids, OwnKind::Text, "s").unwrap();
        assert_eq!(find(&store, &to, "2", "s").unwrap(), None);
        assert_eq!(find(&store, &to, "3", "s").unwrap(), Some(OwnKind::Text));
        let last = (MAX_KEPT + 2).to_string();
        assert_eq!(find(&store, &to, &last, "s").unwrap(), Some(OwnKind::Text));
    }
}
