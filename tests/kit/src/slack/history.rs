//! `conversations.history` (top-level messages and broadcast replies, newest first) and
//! `conversations.replies` (the parent, then replies oldest first), with `oldest`, `latest`,
//! `inclusive`, `limit` and opaque cursors.

use serde_json::{Value, json};

use super::json;
use super::messages::Stored;
use super::params::Params;
use super::state::Shared;
use super::web::ApiResult;

/// The page size without `limit`.
const DEFAULT_LIMIT: u64 = 100;
/// The largest page.
const MAX_LIMIT: u64 = 999;
/// What every cursor starts with (the rest is a `ts` in hex microseconds).
const CURSOR_PREFIX: &str = "bmV4dF90czox";

/// A cursor that continues after the message at `key` (µs).
fn encode_cursor(key: u64) -> String {
    format!("{CURSOR_PREFIX}{key:x}")
}

/// The `ts` (µs) a cursor continues after.
fn decode_cursor(cursor: &str) -> Result<u64, &'static str> {
    cursor
        .strip_prefix(CURSOR_PREFIX)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or("invalid_cursor")
}

/// The window and page the arguments ask for.
struct Window {
    oldest: u64,
    latest: Option<u64>,
    inclusive: bool,
    limit: usize,
    cursor: Option<u64>,
}

impl Window {
    fn of(params: &Params) -> Result<Window, &'static str> {
        let oldest = match params.nonempty("oldest") {
            Some(ts) => json::parse_ts(&ts).ok_or("invalid_ts_oldest")?,
            None => 0,
        };
        let latest = match params.nonempty("latest") {
            Some(ts) => Some(json::parse_ts(&ts).ok_or("invalid_ts_latest")?),
            None => None,
        };
        let limit = params
            .u64("limit")
            .filter(|l| *l > 0)
            .unwrap_or(DEFAULT_LIMIT)
            .min(MAX_LIMIT);
        let cursor = match params.nonempty("cursor") {
            Some(cursor) => Some(decode_cursor(&cursor)?),
            None => None,
        };
        Ok(Window {
            oldest,
            latest,
            inclusive: params.bool("inclusive"),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            cursor,
        })
    }

    /// Whether `key` lies between `oldest` and `latest`.
    fn holds(&self, key: u64) -> bool {
        let after = if self.inclusive {
            key >= self.oldest
        } else {
            key > self.oldest
        };
        let before = self
            .latest
            .is_none_or(|l| if self.inclusive { key <= l } else { key < l });
        after && before
    }

    /// Takes one page from `messages` (already filtered and ordered): the page, and the
    /// cursor of the next one (`""` when done).
    fn page<'a>(
        &self,
        messages: impl Iterator<Item = (u64, &'a Stored)>,
    ) -> (Vec<&'a Stored>, String) {
        let mut messages = messages.peekable();
        let page: Vec<(u64, &Stored)> = messages.by_ref().take(self.limit).collect();
        let next = match (messages.peek(), page.last()) {
            (Some(_), Some((key, _))) => encode_cursor(*key),
            _ => String::new(),
        };
        (page.into_iter().map(|(_, m)| m).collect(), next)
    }
}

/// The answer's paging fields.
fn paged(messages: Vec<Value>, next_cursor: String) -> Value {
    json!({
        "messages": messages,
        "has_more": !next_cursor.is_empty(),
        "pin_count": 0,
        "response_metadata": { "next_cursor": next_cursor },
    })
}

/// `conversations.history`: top-level messages (and broadcast replies), newest first.
pub(crate) fn history(shared: &Shared, params: &Params) -> ApiResult {
    let state = shared.lock();
    let channel = state.channel(&params.text("channel"))?;
    let window = Window::of(params)?;
    let matching = channel
        .messages
        .iter()
        .rev()
        .filter(|(_, m)| !m.deleted && (m.thread_ts.is_none() || m.broadcast))
        .filter(|(key, _)| window.holds(**key))
        .filter(|(key, _)| window.cursor.is_none_or(|c| **key < c))
        .map(|(key, m)| (*key, m));
    let (page, next) = window.page(matching);
    let messages = page.iter().map(|m| state.render(channel, m)).collect();
    Ok(paged(messages, next))
}

/// `conversations.replies`: the thread of `ts` (the parent first, on every page), replies
/// oldest first.
pub(crate) fn replies(shared: &Shared, params: &Params) -> ApiResult {
    let state = shared.lock();
    let channel_id = params.text("channel");
    let channel = state.channel(&channel_id)?;
    let root = state.thread_root(&channel_id, &params.text("ts"))?;
    let parent = channel.live(&root).ok_or("thread_not_found")?;
    let window = Window::of(params)?;
    let matching = channel
        .replies(&root)
        .filter_map(|m| json::parse_ts(&m.ts).map(|key| (key, m)))
        .filter(|(key, _)| window.holds(*key))
        .filter(|(key, _)| window.cursor.is_none_or(|c| *key > c));
    let (page, next) = window.page(matching);
    let mut messages = vec![state.render(channel, parent)];
    messages.extend(page.iter().map(|m| state.render(channel, m)));
    Ok(paged(messages, next))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn cursors_round_trip() {
        let key = 1_700_000_000_000_100;
        assert_eq!(decode_cursor(&encode_cursor(key)), Ok(key));
        assert_eq!(decode_cursor("junk"), Err("invalid_cursor"));
    }
}
