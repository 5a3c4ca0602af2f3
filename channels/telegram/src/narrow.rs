//! A `getUpdates` batch that cannot be decoded (e.g. a message text holding a lone UTF-16
//! surrogate `\ud800`, which no strict JSON decoder accepts, so teloxide fails the whole
//! batch) is narrowed down: the updates are fetched one at a time from the offset, and the
//! one that cannot be decoded is skipped with a log line and a durable counter, so that
//! intake goes on instead of asking for the same offset forever.

use chela_channel::InboundSink;
use serde::Deserialize;
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::{AllowedUpdate, Update};

/// What fetching the single update at an offset gave.
pub(crate) enum Narrowed {
    /// It decoded: handle it as usual.
    Updates(Vec<Update>),
    /// Update `id` cannot be decoded (the error says why): skip it.
    Skip(i64, String),
    /// Narrowing failed too (network, or no update id readable): retry later.
    Retry,
}

/// Fetches the one update at `offset`.
pub(crate) async fn narrow(bot: &Bot, offset: i64) -> Narrowed {
    let request = bot
        .get_updates()
        .offset(i32::try_from(offset).unwrap_or(i32::MAX))
        .limit(1)
        .timeout(0)
        .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
    match request.send().await {
        Ok(updates) => Narrowed::Updates(updates),
        Err(RequestError::InvalidJson { source, raw }) => match first_update_id(&raw) {
            Some(id) if id >= offset => Narrowed::Skip(id, source.to_string()),
            _ => {
                tracing::warn!(error = %source, offset, "telegram: no update id found in an undecodable getUpdates answer; retrying");
                Narrowed::Retry
            }
        },
        Err(e) => {
            tracing::warn!(error = %crate::errors::channel_error(e), "telegram getUpdates (one update) failed; retrying");
            Narrowed::Retry
        }
    }
}

/// Counts and logs the skipped update `id`; the count is kept in the sink's cursor
/// `telegram:<account>:undecodable`.
pub(crate) async fn count_skipped(sink: &dyn InboundSink, account: &str, id: i64, error: &str) {
    let name = format!("telegram:{account}:undecodable");
    let total = sink.cursor(&name).await.unwrap_or(0).saturating_add(1);
    tracing::warn!(
        update_id = id,
        error,
        skipped_total = total,
        "telegram: an update cannot be decoded; skipped"
    );
    if let Err(e) = sink.save_cursor(&name, total).await {
        tracing::warn!(error = %e, "telegram: cannot save the undecodable-update counter");
    }
}

/// The `update_id` of the first update of a raw `getUpdates` answer, read without decoding
/// anything else (the ignored strings are not checked for valid escapes).
pub(crate) fn first_update_id(raw: &str) -> Option<i64> {
    #[derive(Deserialize)]
    struct Answer {
        result: Vec<IdOnly>,
    }
    #[derive(Deserialize)]
    struct IdOnly {
        update_id: i64,
    }
    let answer: Answer = serde_json::from_str(raw).ok()?;
    answer.result.first().map(|u| u.update_id)
}

/// The `update_id` of one raw update (a webhook body), read without decoding anything else.
pub(crate) fn update_id(raw: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct IdOnly {
        update_id: i64,
    }
    serde_json::from_slice::<IdOnly>(raw)
        .ok()
        .map(|u| u.update_id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_update_id_is_read_past_a_lone_surrogate() {
        let raw = r#"{"ok":true,"result":[{"update_id":17,"message":{"text":"bad \ud800 text","chat":{"id":1}}}]}"#;
        assert!(serde_json::from_str::<serde_json::Value>(raw).is_err());
        assert_eq!(first_update_id(raw), Some(17));
        assert_eq!(first_update_id(r#"{"ok":true,"result":[]}"#), None);
        assert_eq!(first_update_id("not json"), None);
        assert_eq!(
            update_id(br#"{"update_id":9,"message":{"text":"\udc00"}}"#),
            Some(9)
        );
    }
}
