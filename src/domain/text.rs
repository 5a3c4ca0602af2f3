//! Small text helpers every layer may use on what users typed.

/// Longest excerpt of a user's argument that a command answer echoes.
pub const ECHO_CHARS: usize = 40;

/// A short, single-line excerpt of `arg` for a command answer: control characters become
/// `?`, and anything past [`ECHO_CHARS`] characters is cut with `…`.
pub fn excerpt(arg: &str) -> String {
    let mut out: String = arg
        .chars()
        .take(ECHO_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if arg.chars().nth(ECHO_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// Longest part of a stranger's chosen name [`quoted`] shows.
pub const QUOTED_CHARS: usize = 64;

/// `text` someone else chose (a stranger's display name), made safe to show an operator:
/// in double quotes, with quotes, backslashes, newlines, control and other invisible
/// characters (bidi overrides too) escaped as in Rust's `{:?}`, and cut after
/// [`QUOTED_CHARS`] characters with `…`. Callers say it is unverified.
pub fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars().take(QUOTED_CHARS) {
        match c {
            '\'' => out.push(c),
            _ => out.extend(c.escape_debug()),
        }
    }
    if text.chars().nth(QUOTED_CHARS).is_some() {
        out.push('…');
    }
    out.push('"');
    out
}

/// True when `text` holds nothing to answer: empty, whitespace only, or zero-width
/// characters only (U+200B..U+200D, U+2060, U+FEFF).
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| {
        c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_name_is_one_escaped_bounded_line() {
        assert_eq!(quoted("Ann O'Hara"), "\"Ann O'Hara\"");
        let hostile = "Ann\"\napproved: yes\u{1b}[2J\u{202E}";
        let shown = quoted(hostile);
        assert!(!shown.contains('\n') && !shown.contains('\u{1b}') && !shown.contains('\u{202E}'));
        assert_eq!(shown, "\"Ann\\\"\\napproved: yes\\u{1b}[2J\\u{202e}\"");
        let long = quoted(&"x".repeat(500));
        assert_eq!(long.chars().count(), QUOTED_CHARS + 3);
        assert!(long.ends_with("…\""));
    }
}
