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

/// True when `text` holds nothing to answer: empty, whitespace only, or zero-width
/// characters only (U+200B..U+200D, U+2060, U+FEFF).
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| {
        c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
    })
}
