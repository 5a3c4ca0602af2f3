//! Transcripts written by OpenClaw and pi, read into chela's schema (`chela sessions import`,
//! `chela import openclaw`).
//!
//! Their JSONL (header version 1 to 4) is a tree: every entry names its parent, and the last
//! entry is the leaf. chela keeps one linear history, so the leaf's chain (the active branch)
//! becomes the transcript and each entry's `parentId` is rewritten to the entry kept before it.
//! Message content may be a plain string (made a text block); `custom_message` entries, which
//! pi sends to the model as user turns, become user messages. What chela cannot hold
//! (`thinking_level_change`, `custom`, `label`, `session_info`, `branch_summary`, entries off the
//! active branch, unknown content blocks) is counted in [`Converted::not_carried`] by kind,
//! never dropped silently.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};

use crate::domain::message::Message;
use crate::store::entry::{Entry, EntryKind, Item, SessionHeader, TRANSCRIPT_VERSION};

/// Why a foreign transcript cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ForeignError {
    /// A line is not JSON.
    #[error("line {line}: not JSON: {reason}")]
    NotJson {
        /// 1-based line number.
        line: usize,
        /// The parser's message.
        reason: String,
    },
    /// The first line is not a session header.
    #[error("the first line must be the session header (type \"session\")")]
    NoHeader,
    /// The header's version is not one chela reads.
    #[error("transcript version {0} is not supported (1 to 4 are)")]
    Version(u64),
}

/// A foreign transcript in chela's schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The header and the active branch's entries chela holds, in order.
    pub entries: Vec<Entry>,
    /// What was not carried over: kind -> count (e.g. `thinking_level_change`,
    /// `off the active branch: message`).
    pub not_carried: BTreeMap<String, usize>,
}

impl Converted {
    /// The transcript as JSONL lines, each ending in `\n` (what `Store::import` reads).
    pub fn to_jsonl(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::new();
        for entry in &self.entries {
            serde_json::to_writer(&mut out, entry)?;
            out.push(b'\n');
        }
        Ok(out)
    }
}

/// Reads an OpenClaw or pi JSONL transcript.
pub fn convert_jsonl(text: &str) -> Result<Converted, ForeignError> {
    let mut values = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str::<Value>(line).map_err(|e| ForeignError::NotJson {
            line: n + 1,
            reason: e.to_string(),
        })?;
        values.push(value);
    }
    convert_values(values)
}

/// Reads a transcript given as parsed lines, header first (OpenClaw's SQLite rows).
pub fn convert_values(values: Vec<Value>) -> Result<Converted, ForeignError> {
    let mut values = values.into_iter();
    let header = values.next().ok_or(ForeignError::NoHeader)?;
    if header["type"] != "session" {
        return Err(ForeignError::NoHeader);
    }
    let version = header["version"].as_u64().unwrap_or(1);
    if !(1..=4).contains(&version) {
        return Err(ForeignError::Version(version));
    }
    let header = SessionHeader {
        version: TRANSCRIPT_VERSION,
        id: text_of(&header["id"]),
        timestamp: text_of(&header["timestamp"]),
        cwd: text_of(&header["cwd"]),
    };
    let items = with_ids(values.collect());
    let mut not_carried = BTreeMap::new();
    let active = active_branch(&items);
    let mut entries = vec![Entry::Session(header)];
    let mut previous: Option<String> = None;
    for (id, _, value) in &items {
        let kind_name = value["type"].as_str().unwrap_or("untyped").to_string();
        if !active.contains(id.as_str()) {
            bump(
                &mut not_carried,
                format!("off the active branch: {kind_name}"),
            );
            continue;
        }
        let Some(kind) = entry_kind(value, &mut not_carried) else {
            continue;
        };
        let timestamp = text_of(&value["timestamp"]);
        entries.push(Entry::Item(Item {
            id: id.clone(),
            parent_id: previous.replace(id.clone()),
            timestamp,
            kind,
        }));
    }
    Ok(Converted {
        entries,
        not_carried,
    })
}

/// Every entry as (id, parent id, value). Version 1 entries have no ids: each gets a fresh one
/// and the entry before it as parent, as pi's own migration does.
fn with_ids(values: Vec<Value>) -> Vec<(String, Option<String>, Value)> {
    let mut seen = HashSet::new();
    let mut previous: Option<String> = None;
    let mut out = Vec::with_capacity(values.len());
    for (n, value) in values.into_iter().enumerate() {
        let (id, parent) = match value["id"].as_str() {
            Some(id) if seen.insert(id.to_string()) => (
                id.to_string(),
                value["parentId"].as_str().map(str::to_string),
            ),
            _ => (format!("{n:08x}"), previous.clone()),
        };
        previous = Some(id.clone());
        out.push((id, parent, value));
    }
    out
}

/// The ids on the chain from the leaf (the last entry) to the root.
fn active_branch(items: &[(String, Option<String>, Value)]) -> HashSet<&str> {
    let parents: HashMap<&str, Option<&str>> = items
        .iter()
        .map(|(id, parent, _)| (id.as_str(), parent.as_deref()))
        .collect();
    let mut active = HashSet::new();
    let mut at = items.last().map(|(id, _, _)| id.as_str());
    while let Some(id) = at {
        if !active.insert(id) {
            break; // a cycle: stop rather than loop
        }
        at = parents.get(id).copied().flatten();
    }
    active
}

/// The chela entry a foreign entry becomes, or `None` (counted in `not_carried`).
fn entry_kind(value: &Value, not_carried: &mut BTreeMap<String, usize>) -> Option<EntryKind> {
    let kind = value["type"].as_str().unwrap_or("untyped");
    match kind {
        "message" => {
            let message = message(&value["message"], &value["timestamp"], not_carried);
            if message.is_none() {
                let role = value["message"]["role"].as_str().unwrap_or("unknown");
                bump(not_carried, format!("message with role {role}"));
            }
            message.map(EntryKind::Message)
        }
        "custom_message" => {
            let as_user = json!({"role": "user", "content": value["content"].clone()});
            let message = message(&as_user, &value["timestamp"], not_carried);
            if message.is_none() {
                bump(not_carried, "custom_message".into());
            }
            message.map(EntryKind::Message)
        }
        "model_change" => Some(EntryKind::ModelChange {
            provider: text_of(&value["provider"]),
            model_id: text_of(&value["modelId"]),
        }),
        "compaction" => Some(EntryKind::Compaction {
            summary: text_of(&value["summary"]),
            first_kept_entry_id: text_of(&value["firstKeptEntryId"]),
            tokens_before: value["tokensBefore"].as_u64().unwrap_or(0),
        }),
        "reset" => Some(EntryKind::Reset {
            reason: text_of(&value["reason"]),
        }),
        other => {
            bump(not_carried, other.to_string());
            None
        }
    }
}

/// A foreign message in chela's shape: string content becomes a text block, unknown blocks
/// are counted and left out, missing fields get their defaults. `None` for roles chela has no
/// place for.
fn message(
    value: &Value,
    entry_timestamp: &Value,
    not_carried: &mut BTreeMap<String, usize>,
) -> Option<Message> {
    let mut object: Map<String, Value> = value.as_object()?.clone();
    let role = object.get("role").and_then(Value::as_str)?.to_string();
    if role == "custom" {
        object.insert("role".into(), json!("user"));
    } else if !matches!(role.as_str(), "user" | "assistant" | "toolResult") {
        return None;
    }
    let content = blocks(object.remove("content").unwrap_or(Value::Null), not_carried);
    object.insert("content".into(), Value::Array(content));
    if !object.get("timestamp").is_some_and(Value::is_u64) {
        let ms = entry_timestamp
            .as_str()
            .and_then(crate::store::timestamp::iso_to_ms)
            .unwrap_or(0);
        object.insert("timestamp".into(), json!(ms));
    }
    if role == "assistant" {
        for (field, default) in [
            ("provider", json!("")),
            ("model", json!("")),
            ("stopReason", json!("stop")),
        ] {
            object.entry(field).or_insert(default);
        }
        let usage = object.entry("usage").or_insert(json!({}));
        for field in ["input", "output", "cacheRead", "cacheWrite", "totalTokens"] {
            if let Some(usage) = usage.as_object_mut()
                && !usage.get(field).is_some_and(Value::is_u64)
            {
                usage.insert(field.into(), json!(0));
            }
        }
    }
    if role == "toolResult" {
        object.entry("isError").or_insert(json!(false));
        object.entry("toolName").or_insert(json!(""));
    }
    serde_json::from_value(Value::Object(object)).ok()
}

/// Content as chela's blocks: a string is one text block; blocks chela does not know are
/// counted (`content block <type>`) and left out.
fn blocks(content: Value, not_carried: &mut BTreeMap<String, usize>) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(items) => items
            .into_iter()
            .filter(|block| {
                let kind = block["type"].as_str().unwrap_or("untyped");
                let known = matches!(kind, "text" | "thinking" | "toolCall" | "image")
                    && serde_json::from_value::<crate::domain::message::ContentBlock>(
                        block.clone(),
                    )
                    .is_ok();
                if !known {
                    bump(not_carried, format!("content block {kind}"));
                }
                known
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A JSON string's text, or "" for anything else.
fn text_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// Adds one to `kind`'s count.
fn bump(counts: &mut BTreeMap<String, usize>, kind: String) {
    *counts.entry(kind).or_default() += 1;
}

#[cfg(test)]
#[path = "foreign_tests.rs"]
mod tests;
