//! Group context: the unmentioned messages of a group kept for its next mentioned turn
//! (SPEC: admission `History`). One gateway keeps them in memory and writes them through to
//! the store for a restart ([`GroupContext::Local`]). On a cluster a mention may reach
//! another node than the messages before it, so the context lives in the store alone
//! ([`GroupContext::Shared`]): appended and taken there atomically, under the same caps,
//! and every node sees the same.

use std::sync::Mutex;

use chela_channel::Inbound;

use crate::inbound::admission::{self, GroupHistory, HISTORY_GROUPS, HISTORY_PER_GROUP};
use crate::store::Store;

/// Where group context is kept.
pub enum GroupContext {
    /// In memory, written through to the store.
    Local(Mutex<GroupHistory>),
    /// In the store alone (several nodes).
    Shared,
}

impl GroupContext {
    /// Kept in memory, starting from what the store saved (`saved`).
    pub fn local(saved: Vec<(String, Vec<String>)>) -> GroupContext {
        GroupContext::Local(Mutex::new(GroupHistory::restore(saved)))
    }

    /// Frames `text` of group session `key` with the context kept for it, which is
    /// forgotten (it goes with this turn); `text` unchanged when none was kept.
    pub(super) fn frame(&self, store: &Store, key: &str, text: &str) -> String {
        let GroupContext::Local(history) = self else {
            return match store.take_group_history(key) {
                Ok(lines) => admission::frame_lines(lines, text),
                Err(e) => {
                    tracing::warn!(error = %e, session = %key, "cannot read the group context");
                    text.to_owned()
                }
            };
        };
        let Ok(mut history) = history.lock() else {
            return text.to_owned();
        };
        let framed = history.frame(key, text);
        if framed != text {
            forget(store, key);
        }
        framed
    }

    /// Keeps `inbound`, an unmentioned message of group session `key`, as context; true when
    /// it is the first one kept since the session's last turn (as far as this node knows).
    pub(super) fn keep(&self, store: &Store, key: &str, inbound: &Inbound) -> bool {
        let sender = &inbound.sender;
        let name = if sender.name.is_empty() {
            &sender.id
        } else {
            &sender.name
        };
        let text = crate::inbound::attachments::context_line(inbound);
        let GroupContext::Local(history) = self else {
            let line = admission::history_line(name, &text);
            if let Err(e) = store.append_group_line(key, &line, HISTORY_PER_GROUP, HISTORY_GROUPS) {
                tracing::warn!(error = %e, session = %key, "cannot keep the group context");
            }
            return false;
        };
        let Ok(mut history) = history.lock() else {
            return false;
        };
        if let Some(forgotten) = history.remember(key, name, &text) {
            forget(store, &forgotten);
        }
        // Written through, so a restart keeps the context (the channel's cursor moves past
        // this message once it returns).
        let lines = history.lines(key);
        if let Err(e) = store.save_group_history(key, &lines) {
            tracing::warn!(error = %e, session = %key, "cannot save group history");
        }
        lines.len() == 1
    }
}

/// Drops the saved group history of `key` (it was framed into a turn, or made room).
fn forget(store: &Store, key: &str) {
    if let Err(e) = store.clear_group_history(key) {
        tracing::warn!(error = %e, session = %key, "cannot clear group history");
    }
}
