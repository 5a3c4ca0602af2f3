//! chela's transcript in the forms OpenClaw and pi load. Both give assistant messages pi's
//! `api` field and `usage.cost`.
//! - [`for_pi_and_chela`] (`chela sessions export`): every entry, the entry after each `reset`
//!   made a new root (`parentId: null`), so pi's active branch, walked from the last entry
//!   back, starts after the last reset and does not see older messages; pi keeps the older
//!   entries and the `reset` entries as entries it does not show, and chela imports the file
//!   back whole.
//! - [`to_pi`] (`--format pi`): only what follows the last `reset`, its first entry the root.

use serde_json::{Value, json};

use crate::store::foreign::ForeignError;

/// The JSON value of each non-blank line of `text`.
fn values(text: &str) -> Result<Vec<Value>, ForeignError> {
    let mut values = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| ForeignError::NotJson {
            line: n + 1,
            reason: e.to_string(),
        })?;
        values.push(value);
    }
    Ok(values)
}

/// Rewrites chela's JSONL `text` for pi and OpenClaw.
pub fn to_pi(text: &str) -> Result<String, ForeignError> {
    let values = values(text)?;
    let Some(header) = values.first().filter(|h| h["type"] == "session").cloned() else {
        return Err(ForeignError::NoHeader);
    };
    let after_reset = values
        .iter()
        .rposition(|v| v["type"] == "reset")
        .map_or(1, |at| at + 1);
    let mut out = String::new();
    push_line(&mut out, &header);
    for (n, mut value) in values.into_iter().skip(after_reset).enumerate() {
        if n == 0 {
            value["parentId"] = Value::Null;
        }
        if value["message"]["role"] == "assistant" {
            for_pi(&mut value["message"]);
        }
        push_line(&mut out, &value);
    }
    Ok(out)
}

/// Rewrites chela's JSONL `text` so pi and OpenClaw load it and chela imports it back: every
/// entry kept, the entry after each `reset` a new root, assistant messages with `api` and
/// `usage.cost`.
pub fn for_pi_and_chela(text: &str) -> Result<String, ForeignError> {
    let mut out = String::new();
    let mut after_reset = false;
    for mut value in values(text)? {
        if after_reset {
            value["parentId"] = Value::Null;
        }
        after_reset = value["type"] == "reset";
        if value["message"]["role"] == "assistant" {
            for_pi(&mut value["message"]);
        }
        push_line(&mut out, &value);
    }
    Ok(out)
}

/// Adds pi's `api` (from the provider) and `usage.cost` to an assistant message.
fn for_pi(message: &mut Value) {
    if message.get("api").is_none() {
        let api = match message["provider"].as_str() {
            Some("anthropic") => "anthropic-messages",
            _ => "openai-completions",
        };
        message["api"] = json!(api);
    }
    if message["usage"].is_object() && message["usage"].get("cost").is_none() {
        message["usage"]["cost"] =
            json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0});
    }
}

/// Appends `value` as one line.
fn push_line(out: &mut String, value: &Value) {
    out.push_str(&value.to_string());
    out.push('\n');
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A transcript of a message, a reset, a message and an answer from `provider`.
    fn with_reset(provider: &str) -> String {
        [
            r#"{"type":"session","version":4,"id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
            r#"{"type":"message","id":"1","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"before"}],"timestamp":1}}"#,
            r#"{"type":"reset","id":"2","parentId":"1","timestamp":"t","reason":"/reset"}"#,
            r#"{"type":"message","id":"3","parentId":"2","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"after"}],"timestamp":2}}"#,
            &format!(
                r#"{{"type":"message","id":"4","parentId":"3","timestamp":"t","message":{{"role":"assistant","content":[],"provider":"{provider}","model":"m","usage":{{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3}},"stopReason":"stop","timestamp":3}}}}"#
            ),
        ]
        .map(|line| format!("{line}\n"))
        .concat()
    }

    #[test]
    fn the_whole_export_makes_a_root_after_each_reset_and_keeps_everything() {
        let text = &with_reset("openai");
        let out = for_pi_and_chela(text).unwrap();
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[1]["message"]["content"][0]["text"], "before");
        assert_eq!(lines[2]["parentId"], "1");
        assert_eq!(lines[3]["parentId"], Value::Null);
        assert_eq!(lines[4]["parentId"], "3");
        assert_eq!(lines[4]["message"]["api"], "openai-completions");
        assert_eq!(lines[4]["message"]["usage"]["cost"]["total"], 0);
        // Done twice, it changes nothing more.
        assert_eq!(for_pi_and_chela(&out).unwrap(), out);
    }

    #[test]
    fn export_starts_after_the_last_reset_with_api_and_cost() {
        let text = &with_reset("anthropic");
        let out = to_pi(text).unwrap();
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert!(!out.contains("before"));
        assert_eq!(lines[1]["id"], "3");
        assert_eq!(lines[1]["parentId"], Value::Null);
        assert_eq!(lines[2]["message"]["api"], "anthropic-messages");
        assert_eq!(lines[2]["message"]["usage"]["cost"]["total"], 0);
        assert_eq!(lines[2]["message"]["usage"]["totalTokens"], 3);
    }
}
