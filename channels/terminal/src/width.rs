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

/// The rows one line of `text` takes on a terminal `cols` wide (at least one).
pub fn rows(text: &str, cols: usize) -> usize {
    let cols = cols.max(1);
    columns(text).div_ceil(cols).max(1)
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
    }
}
