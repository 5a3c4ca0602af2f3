//! Escaping of key components (`%xx`) and of whole keys into storage names (`.` and `_xx`).

use std::fmt::{self, Write as _};

use super::KeyError;

/// Bytes a key component keeps as they are; every other byte is written `%xx`.
fn component_safe(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'+' | b'@' | b'-')
}

/// Displays a component with unsafe bytes escaped as `%xx` (lowercase hex).
pub(super) struct Escaped<'a>(pub(super) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0.as_bytes() {
            if component_safe(b) {
                f.write_char(char::from(b))?;
            } else {
                write!(f, "%{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// Decodes one component of `key`; rejects empty components and non-canonical escapes.
pub(super) fn unescape(key: &str, component: &str) -> Result<String, KeyError> {
    if component.is_empty() {
        return Err(KeyError::new(key, "empty component"));
    }
    let bytes = decode(component.as_bytes(), b'%', |b| {
        component_safe(b).then_some(b)
    })
    .and_then(|bytes| String::from_utf8(bytes).ok())
    .ok_or_else(|| KeyError::new(key, format!("bad escape in {component:?}")))?;
    if Escaped(&bytes).to_string() != component {
        return Err(KeyError::new(
            key,
            format!("non-canonical escape in {component:?}"),
        ));
    }
    Ok(bytes)
}

/// Decodes `escape`-prefixed two-digit lowercase hex escapes; `plain` maps (or rejects) other bytes.
fn decode(input: &[u8], escape: u8, plain: impl Fn(u8) -> Option<u8>) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        if b == escape {
            let hex = |j: usize| match input.get(j) {
                Some(d @ b'0'..=b'9') => Some(d - b'0'),
                Some(d @ b'a'..=b'f') => Some(d - b'a' + 10),
                _ => None,
            };
            out.push(hex(i + 1)? * 16 + hex(i + 2)?);
            i += 3;
        } else {
            out.push(plain(b)?);
            i += 1;
        }
    }
    Some(out)
}

/// A name for `key` safe for file names and sled: only `[a-z0-9._-]`, and reversible with
/// [`from_storage_name`]. `:` becomes `.` (except a leading one); `[a-z0-9-]` stay; every other
/// byte is written `_xx` (lowercase hex). `agent:main:telegram:direct:42` becomes
/// `agent.main.telegram.direct.42`. A name is never `.` or `..`.
pub fn storage_name(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 8);
    for (i, &b) in key.as_bytes().iter().enumerate() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => out.push(char::from(b)),
            b':' if i > 0 => out.push('.'),
            _ => {
                let _ = write!(out, "_{b:02x}");
            }
        }
    }
    out
}

/// The inverse of [`storage_name`]; rejects names [`storage_name`] would not produce.
pub fn from_storage_name(name: &str) -> Result<String, KeyError> {
    let key = decode(name.as_bytes(), b'_', |b| match b {
        b'.' => Some(b':'),
        b'a'..=b'z' | b'0'..=b'9' | b'-' => Some(b),
        _ => None,
    })
    .and_then(|bytes| String::from_utf8(bytes).ok())
    .ok_or_else(|| KeyError::new(name, "not a storage name"))?;
    if storage_name(&key) != name {
        return Err(KeyError::new(name, "non-canonical storage name"));
    }
    Ok(key)
}
