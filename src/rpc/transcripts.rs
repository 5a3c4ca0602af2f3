//! `sessions.show` and `sessions.export`: a session's transcript, readable or as JSONL, while
//! the gateway holds the store (`chela sessions show|export` use them then). `sessions.show`
//! with `tail` renders only the last messages (`chela mcp serve`'s history).

use serde::Deserialize;
use serde_json::{Value, json};

use super::protocol::{self, Fault};
use crate::store::Store;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyParams {
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShowParams {
    key: String,
    /// Only the last this many messages.
    #[serde(default)]
    tail: Option<usize>,
}

/// Runs transcript method `method`; `None` when it is not one.
pub(super) fn call(store: &Store, method: &str, params: &Value) -> Option<Result<Value, Fault>> {
    let result = match method {
        "sessions.show" => protocol::params::<ShowParams>(params).and_then(|p| show(store, p)),
        "sessions.export" => protocol::params::<KeyParams>(params).and_then(|p| {
            let mut out = Vec::new();
            store.export(&p.key, &mut out).map_err(failed)?;
            let jsonl = String::from_utf8(out).map_err(|e| Fault::internal(e.to_string()))?;
            Ok(json!({ "jsonl": jsonl }))
        }),
        _ => return None,
    };
    Some(result)
}

/// `sessions.show`: the whole transcript as text, or with `tail` only its last messages
/// (`shown` of `messages`).
fn show(store: &Store, params: ShowParams) -> Result<Value, Fault> {
    let Some(count) = params.tail else {
        let text = store.render_text(&params.key).map_err(failed)?;
        return Ok(json!({ "text": text }));
    };
    let entries = store.entries(&params.key).map_err(failed)?;
    let tail = super::transcript_tail::render(&entries, count);
    Ok(json!({ "text": tail.text, "shown": tail.shown, "messages": tail.total }))
}

/// A store error as the answer's fault.
fn failed(e: crate::store::StoreError) -> Fault {
    Fault::new(protocol::NOT_ACCEPTED, e.to_string())
}
