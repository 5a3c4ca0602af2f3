//! Small pieces of `multipart/form-data` the fakes parse (Discord's file sends, Slack's
//! uploads): a part's `Content-Disposition` parameters and byte-slice splitting.

/// `key="..."` from a part's `Content-Disposition` header.
pub(crate) fn disposition_param(head: &str, key: &str) -> Option<String> {
    let line = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))?;
    line.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// The slices of `haystack` between occurrences of `needle`.
pub(crate) fn split<'a>(haystack: &'a [u8], needle: &[u8]) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    let mut rest = haystack;
    while let Some(at) = find(rest, needle) {
        parts.push(&rest[..at]);
        rest = &rest[at + needle.len()..];
    }
    parts.push(rest);
    parts
}

/// The first index of `needle` in `haystack`.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}
