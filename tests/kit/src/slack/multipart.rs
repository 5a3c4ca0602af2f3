//! `multipart/form-data` bodies: Web API arguments sent as a form, and the file part of an
//! upload to an upload URL.

use crate::form::{disposition_param, find, split};

/// One part of a multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    /// The field name.
    pub(crate) name: String,
    /// The file name, for file parts.
    pub(crate) filename: Option<String>,
    /// The bytes.
    pub(crate) content: Vec<u8>,
}

/// The parts of `body` if `content_type` (lowercased or not) is `multipart/form-data` with
/// a boundary; `None` otherwise.
pub(crate) fn parse(content_type: &str, body: &[u8]) -> Option<Vec<Part>> {
    let boundary = boundary(content_type)?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for raw in split(body, delimiter.as_bytes()).into_iter().skip(1) {
        if raw.starts_with(b"--") {
            break;
        }
        let raw = raw.strip_prefix(b"\r\n").unwrap_or(raw);
        let Some(at) = find(raw, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&raw[..at]);
        let content = &raw[at + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        parts.push(Part {
            name: disposition_param(&head, "name").unwrap_or_default(),
            filename: disposition_param(&head, "filename"),
            content: content.to_vec(),
        });
    }
    Some(parts)
}

/// The boundary of a `multipart/form-data` content type.
fn boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (key, value) = p.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn fields_and_files_are_split() {
        let raw = "--XYZ\r\nContent-Disposition: form-data; name=\"channel\"\r\n\r\nC1\r\n--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XYZ--\r\n";
        let parts = parse("multipart/form-data; boundary=XYZ", raw.as_bytes()).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "channel");
        assert_eq!(parts[0].content, b"C1");
        assert_eq!(parts[1].filename.as_deref(), Some("a.txt"));
        assert_eq!(parts[1].content, b"hello");
        assert!(parse("application/json", b"{}").is_none());
    }
}
