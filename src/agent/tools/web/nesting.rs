//! How deep a page's elements nest, estimated in one linear pass without parsing: the guard
//! in front of html5ever, whose work grows with the square of the depth.

use std::collections::HashMap;

/// Elements that take no closing tag, or whose closing tag is often left out (the parser
/// closes them itself): not counted by [`nesting_estimate`].
const UNCOUNTED: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "tbody", "thead",
    "tfoot", "colgroup", "rb", "rt", "rp", "html", "head", "body",
];

/// Elements whose content is raw text up to their closing tag (no tags inside).
const RAW_TEXT: &[&str] = &["script", "style", "textarea", "title", "xmp", "noembed"];

/// Elements inside which `<x/>` really closes `x` (foreign content); elsewhere the parser
/// ignores the slash and `x` stays open.
const FOREIGN: &[&str] = &["svg", "math"];

/// The open counted elements: a stack and how many of each name it holds, so that a closing
/// tag matching nothing open costs nothing and one matching pops like the parser would.
#[derive(Default)]
struct Open {
    stack: Vec<String>,
    count: HashMap<String, usize>,
}

impl Open {
    fn push(&mut self, name: String) {
        *self.count.entry(name.clone()).or_default() += 1;
        self.stack.push(name);
    }

    /// Closes `name` and everything opened after it; nothing when `name` is not open.
    fn close(&mut self, name: &str) {
        if self.count.get(name).copied().unwrap_or(0) == 0 {
            return;
        }
        while let Some(top) = self.stack.pop() {
            if let Some(n) = self.count.get_mut(&top) {
                *n -= 1;
            }
            if top == name {
                break;
            }
        }
    }

    fn foreign(&self) -> bool {
        FOREIGN
            .iter()
            .any(|f| self.count.get(*f).copied().unwrap_or(0) > 0)
    }
}

/// The deepest nesting of the tags in `html`, counted without parsing, in time linear in its
/// length: each opening tag of an element not in `UNCOUNTED` goes one deeper; a closing tag
/// goes back up only when it matches an open counted element (to just above it); `<x/>`
/// counts as opening `x` except inside `<svg>` or `<math>` (as the parser treats it);
/// comments and the contents of `<script>`, `<style>` and the like are skipped. Unclosed
/// elements make it larger than the real depth, never smaller.
pub fn nesting_estimate(html: &str) -> usize {
    let bytes = html.as_bytes();
    let mut open = Open::default();
    let mut deepest = 0usize;
    let mut i = 0;
    while let Some(offset) = memchr(b'<', &bytes[i..]) {
        let start = i + offset + 1;
        if bytes[start..].starts_with(b"!--") {
            i = find(bytes, start + 3, b"-->").map_or(bytes.len(), |e| e + 3);
            continue;
        }
        let closing = bytes.get(start) == Some(&b'/');
        let name_start = if closing { start + 1 } else { start };
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        i = name_start + name_len;
        if name_len == 0 || !bytes[name_start].is_ascii_alphabetic() {
            continue;
        }
        let name = html[name_start..i].to_ascii_lowercase();
        // The tag ends at the next `>`, or (malformed) where the next tag starts.
        let end = bytes[i..]
            .iter()
            .position(|b| *b == b'>' || *b == b'<')
            .map_or(bytes.len(), |e| i + e);
        let self_closing = bytes.get(end) == Some(&b'>') && bytes[end - 1] == b'/';
        i = if bytes.get(end) == Some(&b'>') {
            end + 1
        } else {
            end
        };
        if closing {
            open.close(&name);
            continue;
        }
        if RAW_TEXT.contains(&name.as_str()) {
            i = raw_text_end(bytes, i, &name);
            continue;
        }
        if UNCOUNTED.contains(&name.as_str()) || (self_closing && open.foreign()) {
            continue;
        }
        open.push(name);
        deepest = deepest.max(open.stack.len());
    }
    deepest
}

/// Where the raw text starting at `from` ends: just after `</name`, else the end.
fn raw_text_end(bytes: &[u8], from: usize, name: &str) -> usize {
    let mut i = from;
    while let Some(at) = find(bytes, i, b"</") {
        let after = at + 2;
        let candidate = bytes.get(after..after + name.len());
        if candidate.is_some_and(|c| c.eq_ignore_ascii_case(name.as_bytes())) {
            return after + name.len();
        }
        i = after;
    }
    bytes.len()
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|b| *b == needle)
}

/// The first `needle` in `bytes` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closing_tag_counts_only_when_it_matches_an_open_element() {
        let html = "<div></span>".repeat(200_000);
        assert_eq!(nesting_estimate(&html), 200_000);
        assert_eq!(
            nesting_estimate("<div><span><b>x</div><div>y</div>"),
            3,
            "</div> closes the span and the b with it"
        );
    }

    #[test]
    fn tags_without_a_closing_bracket_are_scanned_once() {
        // Quadratic before: every `<a` searched to the end of the body for `>`.
        let html = "<a".repeat(1_000_000);
        assert_eq!(nesting_estimate(&html), 1_000_000);
    }

    #[test]
    fn a_self_closing_tag_opens_outside_svg_and_math_only() {
        assert_eq!(nesting_estimate(&"<div/>".repeat(5000)), 5000);
        let svg = format!("<svg>{}</svg><p>x</p>", "<path d='M0'/>".repeat(5000));
        assert_eq!(nesting_estimate(&svg), 1);
    }

    #[test]
    fn comments_and_script_contents_are_skipped() {
        let html = "<!-- <div><div> --><script>if (a<b) { x = '<div><div>' }</script>\
                    <STYLE>p<q{}</style><div>text</div>";
        assert_eq!(nesting_estimate(html), 1);
        assert_eq!(nesting_estimate("<script><div><div>"), 0);
    }
}
