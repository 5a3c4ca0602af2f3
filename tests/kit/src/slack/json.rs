//! Slack's fixed identities and JSON shapes: tokens and ids, message `ts` values, rich text
//! blocks, the events_api envelope, file types.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The bot token (`xoxb-`), for every Web API method but `apps.connections.open`.
pub(crate) const BOT_TOKEN: &str = "xoxb-test";
/// The app-level token (`xapp-`), for `apps.connections.open`.
pub(crate) const APP_TOKEN: &str = "xapp-test";
/// The bot's user id.
pub(crate) const BOT_USER: &str = "UBOT";
/// The bot's bot id (`bot_id` of its messages).
pub(crate) const BOT_ID: &str = "BBOT";
/// The workspace id.
pub(crate) const TEAM_ID: &str = "T1";
/// The app id.
pub(crate) const APP_ID: &str = "A1";

/// Microseconds since the Unix epoch.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    now_micros() / 1_000_000
}

/// `1700000000.000100` for 1700000000000100 µs.
pub(crate) fn format_ts(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// A `ts` (`1700000000.000100`, `1700000000`, `1700000000.5`) in microseconds; `None` when it
/// is not one.
pub(crate) fn parse_ts(ts: &str) -> Option<u64> {
    let ts = ts.trim();
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut micros = 0u64;
    for digit in frac.bytes().chain(std::iter::repeat(b'0')).take(6) {
        micros = micros * 10 + u64::from(digit - b'0');
    }
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// The `rich_text` block Slack clients attach to what a person types: the text, with each
/// `<@U...>` as a `user` element.
pub(crate) fn rich_text(text: &str) -> Value {
    let mut elements = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        if start > 0 {
            elements.push(json!({ "type": "text", "text": &rest[..start] }));
        }
        let inner = &rest[start + 2..start + len];
        let user = inner.split('|').next().unwrap_or(inner);
        elements.push(json!({ "type": "user", "user_id": user }));
        rest = &rest[start + len + 1..];
    }
    if !rest.is_empty() {
        elements.push(json!({ "type": "text", "text": rest }));
    }
    json!([{
        "type": "rich_text",
        "block_id": "rt1",
        "elements": [{ "type": "rich_text_section", "elements": elements }],
    }])
}

/// An `events_api` envelope around `event` (retry fields are set when it is sent).
pub(crate) fn events_api(envelope_id: &str, event_id: u64, event: Value) -> Value {
    json!({
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": 0,
        "retry_reason": "",
        "payload": {
            "token": "tok",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": format!("Ev{event_id:08}"),
            "event_time": now_secs(),
            "authorizations": [
                { "team_id": TEAM_ID, "user_id": BOT_USER, "is_bot": true }
            ],
            "is_ext_shared_channel": false,
            "event_context": format!("ctx-{event_id}"),
        },
    })
}

/// The Socket Mode `hello` a new connection gets first.
pub(crate) fn hello(num_connections: usize) -> Value {
    json!({
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": { "host": "fake", "approximate_connection_time": 18060 },
        "connection_info": { "app_id": APP_ID },
    })
}

/// The `bot_profile` Slack attaches to the bot's messages.
pub(crate) fn bot_profile() -> Value {
    json!({ "id": BOT_ID, "app_id": APP_ID, "name": "chela", "deleted": false, "team_id": TEAM_ID })
}

/// Slack's `filetype` for a file name (by extension).
pub(crate) fn filetype(name: &str) -> String {
    let ext = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "" => "binary".to_owned(),
        "txt" => "text".to_owned(),
        "md" => "markdown".to_owned(),
        "jpeg" => "jpg".to_owned(),
        "yml" => "yaml".to_owned(),
        _ => ext,
    }
}

/// `name` as one URL path segment: bytes outside `A-Za-z0-9-._~` percent-encoded.
pub(crate) fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A MIME type for a file name (by extension), `application/octet-stream` when unknown.
pub(crate) fn mimetype(name: &str) -> &'static str {
    match filetype(name).as_str() {
        "text" => "text/plain",
        "markdown" => "text/markdown",
        "png" => "image/png",
        "jpg" => "image/jpeg",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        "json" => "application/json",
        "ogg" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "csv" => "text/csv",
        "html" => "text/html",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn ts_round_trips_and_orders() {
        assert_eq!(format_ts(1_700_000_000_000_100), "1700000000.000100");
        assert_eq!(parse_ts("1700000000.000100"), Some(1_700_000_000_000_100));
        assert_eq!(parse_ts("1700000000"), Some(1_700_000_000_000_000));
        assert_eq!(parse_ts("1700000000.5"), Some(1_700_000_000_500_000));
        assert_eq!(parse_ts("0"), Some(0));
        assert_eq!(parse_ts("abc"), None);
        assert_eq!(parse_ts("1.2.3"), None);
    }

    #[test]
    fn rich_text_splits_mentions() {
        let blocks = rich_text("<@UBOT> hi <@U1|ann>!");
        let elements = &blocks[0]["elements"][0]["elements"];
        assert_eq!(elements[0]["user_id"], "UBOT");
        assert_eq!(elements[1]["text"], " hi ");
        assert_eq!(elements[2]["user_id"], "U1");
        assert_eq!(elements[3]["text"], "!");
    }
}
