//! How wide text shows on a terminal: escape sequences take no room, wide characters two
//! columns (unicode-width).

use unicode_width::UnicodeWidthChar;

/// `text` without its escape sequences (`ESC [ ... letter`).
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
        }
        // Parameters and intermediates up to the final byte (`@` to `~`).
        for c in chars.by_ref() {
            if ('@'..='~').contains(&c) {
                break;
            }
        }
    }
    out
}

/// The columns `text` takes on one row (escape sequences left out).
pub fn columns(text: &str) -> usize {
    strip(text).chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// The rows one line of `text` takes on a terminal `cols` wide (at least one): a wide
/// character that does not fit at the end of a row goes to the next.
pub fn rows(text: &str, cols: usize) -> usize {
    let (rows, _) = wrap(&strip(text), cols, usize::MAX);
    rows
}

/// Where `text` (no escape sequences) passes `limit` full rows on a terminal `cols` wide:
/// the rows it takes, and the byte offset after the first `limit` of them (its length when
/// it takes no more).
pub fn wrap(text: &str, cols: usize, limit: usize) -> (usize, usize) {
    let cols = cols.max(1);
    let (mut rows, mut col) = (1, 0);
    for (at, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if col + w > cols {
            if rows == limit {
                return (rows + 1, at);
            }
            rows += 1;
            col = 0;
        }
        col += w;
    }
    (rows, text.len())
}

/// `line` with each tab made spaces up to the next stop of 8 columns (the terminal's own
/// stops, which the row count above cannot see).
pub fn expand_tabs(line: &str) -> String {
    if !line.contains('\t') {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let pad = 8 - col % 8;
            out.extend(std::iter::repeat_n(' ', pad));
            col += pad;
        } else {
            out.push(c);
            col += c.width().unwrap_or(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_take_no_room_and_wide_characters_two() {
        assert_eq!(strip("\x1b[1;31mred\x1b[0m"), "red");
        assert_eq!(columns("\x1b[38;2;1;2;3mab\x1b[0m"), 2);
        assert_eq!(columns("日本"), 4);
    }

    #[test]
    fn a_long_line_wraps_onto_more_rows() {
        assert_eq!(rows("", 80), 1);
        assert_eq!(rows(&"x".repeat(80), 80), 1);
        assert_eq!(rows(&"x".repeat(81), 80), 2);
        // A wide character that does not fit goes to the next row.
        assert_eq!(rows(&format!("{}日", "x".repeat(79)), 80), 2);
        assert_eq!(rows(&format!("{}日", "x".repeat(78)), 80), 1);
    }

    #[test]
    fn wrap_finds_where_the_first_rows_end() {
        let text = "x".repeat(250);
        assert_eq!(wrap(&text, 100, 2), (3, 200));
        assert_eq!(wrap("short", 100, 2), (1, 5));
    }

    #[test]
    fn tabs_become_spaces_to_the_next_stop() {
        assert_eq!(expand_tabs("a\tb"), "a       b");
        assert_eq!(expand_tabs("\tx"), "        x");
        assert_eq!(expand_tabs("none"), "none");
    }
}
