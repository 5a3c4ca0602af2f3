//! Group context: the unmentioned messages of a group kept for its next mentioned turn
//! (SPEC: admission `History`). One gateway keeps them in memory ([`Core::history`]) and
//! writes them through to the store for a restart. On a cluster a mention may reach another
//! node than the messages before it, so the context lives in the store alone: appended and
//! taken there atomically, under the same caps, and every node sees the same.

use chela_channel::Inbound;

use super::Core;
use crate::inbound::admission::{self, HISTORY_GROUPS, HISTORY_PER_GROUP};

/// Frames `text` of group session `key` with the context kept for it, which is forgotten
/// (it goes with this turn); `text` unchanged when none was kept.
pub(super) fn frame(core: &Core, key: &str, text: &str) -> String {
    if core.cluster.is_some() {
        return match core.store.take_group_history(key) {
            Ok(lines) => admission::frame_lines(lines, text),
            Err(e) => {
                tracing::warn!(error = %e, session = %key, "cannot read the group context");
                text.to_owned()
            }
        };
    }
    let Ok(mut history) = core.history.lock() else {
        return text.to_owned();
    };
    let framed = history.frame(key, text);
    if framed != text {
        forget(core, key);
    }
    framed
}

/// Keeps `inbound`, an unmentioned message of group session `key`, as context.
pub(super) fn keep(core: &Core, key: &str, inbound: &Inbound) {
    let sender = &inbound.sender;
    let name = if sender.name.is_empty() {
        &sender.id
    } else {
        &sender.name
    };
    let text = super::media::context_line(inbound);
    if core.cluster.is_some() {
        let line = admission::history_line(name, &text);
        if let Err(e) = core
            .store
            .append_group_line(key, &line, HISTORY_PER_GROUP, HISTORY_GROUPS)
        {
            tracing::warn!(error = %e, session = %key, "cannot keep the group context");
        }
        return;
    }
    if let Ok(mut history) = core.history.lock() {
        if let Some(forgotten) = history.remember(key, name, &text) {
            forget(core, &forgotten);
        }
        // Written through, so a restart keeps the context (the channel's cursor moves past
        // this message once it returns).
        if let Err(e) = core.store.save_group_history(key, &history.lines(key)) {
            tracing::warn!(error = %e, session = %key, "cannot save group history");
        }
    }
}

/// Drops the saved group history of `key` (it was framed into a turn, or made room).
fn forget(core: &Core, key: &str) {
    if let Err(e) = core.store.clear_group_history(key) {
        tracing::warn!(error = %e, session = %key, "cannot clear group history");
    }
}
