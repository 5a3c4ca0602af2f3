//! Reading a JSONL transcript for import, the same for every backend: each line is checked
//! (a version-4 header first, known entry types, ids unique, each `parentId` the previous
//! entry's id, or none right after a `reset`, as `chela sessions export` writes it for pi)
//! before anything is stored, and kept byte for byte.

use std::collections::HashSet;
use std::io::BufRead;

use crate::store::entry::{Entry, TRANSCRIPT_VERSION};
use crate::store::error::StoreError;

/// A validated import: every line (entry id, exact bytes), header first.
pub(crate) struct Parsed {
    /// Every line without its line break: the entry id (`None` for the header) and the bytes.
    pub lines: Vec<(Option<String>, Vec<u8>)>,
    /// The id of the last entry (`None` when there is only the header).
    pub last_entry_id: Option<String>,
    /// When the header says the session was created, ms since the epoch.
    pub created_ms: Option<u64>,
}

/// Validates every line of `input`.
pub(crate) fn parse(input: &mut dyn BufRead) -> Result<Parsed, StoreError> {
    let mut buf = Vec::new();
    let mut line_no = 0;
    let mut parsed = Parsed {
        lines: Vec::new(),
        last_entry_id: None,
        created_ms: None,
    };
    let mut ids = HashSet::new();
    let mut after_reset = false;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line_no += 1;
        let mut line = buf.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let invalid = |reason: String| StoreError::InvalidImport {
            line: line_no,
            reason,
        };
        let entry: Entry = serde_json::from_slice(line).map_err(|e| invalid(e.to_string()))?;
        let entry_id = match (parsed.lines.is_empty(), entry) {
            (true, Entry::Session(h)) => {
                if h.version != TRANSCRIPT_VERSION {
                    return Err(invalid(format!(
                        "transcript version {} is not supported (expected {TRANSCRIPT_VERSION})",
                        h.version
                    )));
                }
                parsed.created_ms = crate::store::timestamp::iso_to_ms(&h.timestamp);
                None
            }
            (true, Entry::Item(_)) => {
                return Err(invalid("the first line must be the session header".into()));
            }
            (false, Entry::Session(_)) => return Err(invalid("a second session header".into())),
            (false, Entry::Item(item)) => {
                let new_root = after_reset && item.parent_id.is_none();
                if item.parent_id != parsed.last_entry_id && !new_root {
                    return Err(invalid(format!(
                        "parentId {:?} is not the previous entry's id {:?}",
                        item.parent_id, parsed.last_entry_id
                    )));
                }
                if !ids.insert(item.id.clone()) {
                    return Err(invalid(format!("entry id {} appears twice", item.id)));
                }
                parsed.last_entry_id = Some(item.id.clone());
                after_reset = matches!(item.kind, crate::store::entry::EntryKind::Reset { .. });
                Some(item.id)
            }
        };
        parsed.lines.push((entry_id, line.to_vec()));
    }
    if parsed.lines.is_empty() {
        return Err(StoreError::InvalidImport {
            line: line_no,
            reason: "no session header: the input is empty".into(),
        });
    }
    Ok(parsed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_exact_bytes_and_drops_blank_lines() {
        let input = concat!(
            r#"{"type":"session", "version":4,"id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
            "\r\n\n",
            r#"{"type":"reset","id":"00000001","parentId":null,"timestamp":"t","reason":"/new"}"#,
            "\n",
        );
        let parsed = parse(&mut input.as_bytes()).unwrap();
        assert_eq!(parsed.lines.len(), 2);
        assert_eq!(parsed.lines[0].0, None);
        assert!(
            parsed.lines[0]
                .1
                .starts_with(br#"{"type":"session", "version""#)
        );
        assert_eq!(parsed.last_entry_id.as_deref(), Some("00000001"));
    }

    #[test]
    fn a_new_root_is_accepted_only_right_after_a_reset() {
        let header = r#"{"type":"session","version":4,"id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#;
        let user = |id: &str, parent: &str| {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"t","message":{{"role":"user","content":[{{"type":"text","text":"hi"}}],"timestamp":1}}}}"#
            )
        };
        let reset = r#"{"type":"reset","id":"2","parentId":"1","timestamp":"t","reason":"/new"}"#;
        let after_reset = [
            header.to_owned(),
            user("1", "null"),
            reset.into(),
            user("3", "null"),
        ];
        let parsed = parse(&mut after_reset.join("\n").as_bytes()).unwrap();
        assert_eq!(parsed.last_entry_id.as_deref(), Some("3"));
        let elsewhere = [header.to_owned(), user("1", "null"), user("2", "null")];
        let refused = parse(&mut elsewhere.join("\n").as_bytes()).err().unwrap();
        assert!(
            refused.to_string().contains("is not the previous entry"),
            "{refused}"
        );
    }
}
