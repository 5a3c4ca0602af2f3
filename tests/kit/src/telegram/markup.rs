//! Text rules: length in UTF-16 code units and a simplified `parse_mode` validator.
//!
//! What the validator checks (errors are `can't parse entities: ...`):
//! - `MarkdownV2`: a `\` escapes the next character; each of `_*[]()~`>#+-=|{}.!` outside
//!   markup must be escaped (`Character 'c' is reserved and must be escaped with the preceding
//!   '\'`), except `>` at the start of a line (quote) and `(...)` right after `[text]` (link
//!   URL); `*` bold, `_` italic, `__` underline, `~` strikethrough, `||` spoiler, `[` link,
//!   `` ` `` code and ```` ``` ```` pre must be closed (`Can't find end of Bold entity at byte
//!   offset N`). Inside code and pre only `` ` `` and `\` are special.
//! - `HTML`: `<` starts a tag; tags must be supported (`b strong i em u ins s strike del span
//!   tg-spoiler a code pre blockquote tg-emoji`, else `Unsupported start tag "x" at byte offset
//!   N`), closed (`Can't find end tag corresponding to start tag "b"`) and properly nested
//!   (`Unmatched end tag at byte offset N, expected "</b>", found "</i>"`). `&` is not checked.
//! - `Markdown` (legacy): `*`, `_`, `` ` ``, ```` ``` ```` and `[` must be closed
//!   (`Can't find end of the entity starting at byte offset N`).
//! - any other `parse_mode`: `unsupported parse_mode`.
//!
//! Markup is never rendered: the fake stores and echoes the text as sent.

/// The longest text Telegram accepts, in UTF-16 code units.
pub(crate) const MAX_TEXT: usize = 4096;

/// The length in UTF-16 code units, the unit of the Bot API's limits and entity offsets.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Checks a bot text: not empty (after trimming), at most [`MAX_TEXT`] UTF-16 code units, and
/// valid markup for `parse_mode` unless explicit `entities` were given. The error is the part
/// after `Bad Request: `.
pub(crate) fn check_text(
    text: &str,
    parse_mode: Option<&str>,
    has_entities: bool,
) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("message text is empty".to_owned());
    }
    if utf16_len(text) > MAX_TEXT {
        return Err("message is too long".to_owned());
    }
    match parse_mode {
        Some(mode) if !has_entities => {
            check_markup(mode, text).map_err(|e| format!("can't parse entities: {e}"))
        }
        _ => Ok(()),
    }
}

/// Validates `text` for `parse_mode` (see the module docs).
fn check_markup(mode: &str, text: &str) -> Result<(), String> {
    match mode.to_ascii_lowercase().as_str() {
        "markdownv2" => markdown_v2(text),
        "html" => html(text),
        "markdown" => markdown(text),
        "" => Ok(()),
        _ => Err("unsupported parse_mode".to_owned()),
    }
}

const RESERVED_V2: &str = "_*[]()~`>#+-=|{}.!";

fn markdown_v2(text: &str) -> Result<(), String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let mut open: Vec<(&'static str, usize)> = Vec::new();
    let mut i = 0;
    while let Some(&(offset, c)) = chars.get(i) {
        let line_start = i == 0 || at(i - 1) == Some('\n');
        match c {
            '\\' => i += 2,
            '`' => {
                let pre = at(i + 1) == Some('`') && at(i + 2) == Some('`');
                let (name, width) = if pre { ("Pre", 3) } else { ("Code", 1) };
                i = close_code(&chars, i + width, width).ok_or_else(|| {
                    format!("Can't find end of {name} entity at byte offset {offset}")
                })?;
            }
            '*' | '~' => {
                toggle(
                    &mut open,
                    if c == '*' { "Bold" } else { "Strikethrough" },
                    offset,
                );
                i += 1;
            }
            '_' if at(i + 1) == Some('_') => {
                toggle(&mut open, "Underline", offset);
                i += 2;
            }
            '_' => {
                toggle(&mut open, "Italic", offset);
                i += 1;
            }
            '|' if at(i + 1) == Some('|') => {
                toggle(&mut open, "Spoiler", offset);
                i += 2;
            }
            '[' => {
                open.push(("TextUrl", offset));
                i += 1;
            }
            ']' if open.iter().any(|&(name, _)| name == "TextUrl") => {
                open.retain(|&(name, _)| name != "TextUrl");
                i += 1;
                if at(i) == Some('(') {
                    i = close_url(&chars, i + 1).ok_or_else(|| {
                        format!("Can't find end of a URL at byte offset {offset}")
                    })?;
                }
            }
            '>' if line_start => i += 1,
            c if RESERVED_V2.contains(c) => {
                return Err(format!(
                    "Character '{c}' is reserved and must be escaped with the preceding '\\'"
                ));
            }
            _ => i += 1,
        }
    }
    match open.first() {
        Some((name, offset)) => Err(format!(
            "Can't find end of {name} entity at byte offset {offset}"
        )),
        None => Ok(()),
    }
}

/// Opens `name` at `offset`, or closes it if it is open.
fn toggle(open: &mut Vec<(&'static str, usize)>, name: &'static str, offset: usize) {
    if let Some(pos) = open.iter().position(|&(n, _)| n == name) {
        open.remove(pos);
    } else {
        open.push((name, offset));
    }
}

/// From `i` (inside code), the index after the closing run of `width` backticks.
fn close_code(chars: &[(usize, char)], mut i: usize, width: usize) -> Option<usize> {
    while let Some(&(_, c)) = chars.get(i) {
        match c {
            '\\' => i += 2,
            '`' if (0..width).all(|k| chars.get(i + k).map(|&(_, c)| c) == Some('`')) => {
                return Some(i + width);
            }
            _ => i += 1,
        }
    }
    None
}

/// From `i` (inside a link URL), the index after the closing `)`.
fn close_url(chars: &[(usize, char)], mut i: usize) -> Option<usize> {
    while let Some(&(_, c)) = chars.get(i) {
        match c {
            '\\' => i += 2,
            ')' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

const HTML_TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
];

fn html(text: &str) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    let mut base = 0;
    while let Some(start) = rest.find('<') {
        let offset = base + start;
        let after = &rest[start + 1..];
        let end = after
            .find('>')
            .ok_or_else(|| format!("Unclosed start tag at byte offset {offset}"))?;
        let inner = &after[..end];
        if let Some(name) = inner.strip_prefix('/') {
            let name = name.trim().to_ascii_lowercase();
            match open.pop() {
                Some(top) if top == name => {}
                Some(top) => {
                    return Err(format!(
                        "Unmatched end tag at byte offset {offset}, expected \"</{top}>\", found \"</{name}>\""
                    ));
                }
                None => return Err(format!("Unexpected end tag at byte offset {offset}")),
            }
        } else {
            let name: String = inner
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect::<String>()
                .to_ascii_lowercase();
            if !HTML_TAGS.contains(&name.as_str()) {
                return Err(format!(
                    "Unsupported start tag \"{name}\" at byte offset {offset}"
                ));
            }
            if !inner.ends_with('/') {
                open.push(name);
            }
        }
        base = offset + 1 + end + 1;
        rest = &after[end + 1..];
    }
    match open.first() {
        Some(name) => Err(format!(
            "Can't find end tag corresponding to start tag \"{name}\""
        )),
        None => Ok(()),
    }
}

fn markdown(text: &str) -> Result<(), String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while let Some(&(offset, c)) = chars.get(i) {
        let closer = match c {
            '\\' => {
                i += 2;
                continue;
            }
            '*' | '_' | '`' => c,
            '[' => ']',
            _ => {
                i += 1;
                continue;
            }
        };
        let width = if c == '`' && text[offset..].starts_with("```") {
            3
        } else {
            1
        };
        let from = i + width;
        let found = (from..chars.len()).find(|&j| {
            chars[j].1 == closer && (width == 1 || text[chars[j].0..].starts_with("```"))
        });
        let Some(j) = found else {
            return Err(format!(
                "Can't find end of the entity starting at byte offset {offset}"
            ));
        };
        i = j + width;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn markdown_v2_rules() {
        assert!(
            markdown_v2(
                "hello *bold* _it_ __u__ ~s~ ||sp|| `a.b` ```\nx.y\n``` \\. [l](http://x.y)"
            )
            .is_ok()
        );
        assert!(markdown_v2("> quoted\n>also").is_ok());
        assert_eq!(
            markdown_v2("Done.").unwrap_err(),
            "Character '.' is reserved and must be escaped with the preceding '\\'"
        );
        assert!(markdown_v2("a-b").is_err());
        assert!(markdown_v2("call f(x)").is_err());
        assert_eq!(
            markdown_v2("a *b").unwrap_err(),
            "Can't find end of Bold entity at byte offset 2"
        );
        assert_eq!(
            markdown_v2("`x").unwrap_err(),
            "Can't find end of Code entity at byte offset 0"
        );
        assert!(markdown_v2("```\ncode").is_err());
        assert!(markdown_v2("_x").is_err());
    }

    #[test]
    fn html_rules() {
        assert!(
            html("<b>x</b> <a href=\"u\">l</a> <pre><code class=\"language-rust\">x</code></pre>")
                .is_ok()
        );
        assert_eq!(
            html("<b>x").unwrap_err(),
            "Can't find end tag corresponding to start tag \"b\""
        );
        assert!(
            html("<b>x</i>")
                .unwrap_err()
                .starts_with("Unmatched end tag at byte offset 4")
        );
        assert!(
            html("<foo>x</foo>")
                .unwrap_err()
                .starts_with("Unsupported start tag \"foo\"")
        );
        assert!(html("a < b").is_err());
    }

    #[test]
    fn legacy_markdown_rules() {
        assert!(markdown("*b* _i_ `c` ```p``` [l](u)").is_ok());
        assert!(markdown("snake_case").is_err());
    }

    #[test]
    fn text_limits_in_utf16() {
        assert!(check_text(&"a".repeat(4096), None, false).is_ok());
        assert_eq!(
            check_text(&"a".repeat(4097), None, false).unwrap_err(),
            "message is too long"
        );
        // 2048 emoji = 4096 UTF-16 code units; one more is too long.
        assert!(check_text(&"😀".repeat(2048), None, false).is_ok());
        assert!(check_text(&"😀".repeat(2049), None, false).is_err());
        assert_eq!(
            check_text(" \n", None, false).unwrap_err(),
            "message text is empty"
        );
        assert!(check_text("a.b", Some("MarkdownV2"), true).is_ok());
        assert!(check_text("a.b", Some("Fancy"), false).is_err());
    }
}
