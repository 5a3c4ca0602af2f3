//! `sessions.show` and `sessions.export`: a session's transcript, readable or as JSONL, while
//! the gateway holds the store (`chela sessions show|export` use them then).

use serde::Deserialize;
use serde_json::{Value, json};

use super::protocol::{self, Fault};
use crate::store::Store;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyParams {
    key: String,
}

/// Runs transcript method `method`; `None` when it is not one.
pub(super) fn call(store: &Store, method: &str, params: &Value) -> Option<Result<Value, Fault>> {
    let failed = |e: crate::store::StoreError| Fault::new(protocol::NOT_ACCEPTED, e.to_string());
    let result = match method {
        "sessions.show" => protocol::params::<KeyParams>(params).and_then(|p| {
            let text = store.render_text(&p.key).map_err(failed)?;
            Ok(json!({ "text": text }))
        }),
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
