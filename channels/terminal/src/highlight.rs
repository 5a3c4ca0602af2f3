//! Syntax highlighting of a reply's code blocks, a line at a time as they stream (syntect,
//! the highlighter of bat and many editors, with its built-in syntaxes and the
//! `base16-ocean.dark` theme). The syntaxes load on the first code block, once per process.

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;
use syntect::util::as_24_bit_terminal_escaped;

fn syntaxes() -> &'static SyntaxSet {
    static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
    SYNTAXES.get_or_init(SyntaxSet::load_defaults_nonewlines)
}

fn theme() -> Option<&'static Theme> {
    static THEME: OnceLock<Option<Theme>> = OnceLock::new();
    THEME
        .get_or_init(|| ThemeSet::load_defaults().themes.remove("base16-ocean.dark"))
        .as_ref()
}

/// The highlighter of one code block.
pub struct Code {
    lines: Option<HighlightLines<'static>>,
}

impl Code {
    /// A block in language `lang` (a fence's word: `rust`, `py`, `sh`...); unknown or empty,
    /// its lines come back as `None`.
    pub fn new(lang: &str) -> Code {
        if lang.is_empty() {
            return Code { lines: None };
        }
        let set = syntaxes();
        let lines = set
            .find_syntax_by_token(lang)
            .zip(theme())
            .map(|(syntax, theme)| HighlightLines::new(syntax, theme));
        Code { lines }
    }

    /// The next line of the block with its colours, or `None` when the language is unknown.
    pub fn line(&mut self, line: &str) -> Option<String> {
        let lines = self.lines.as_mut()?;
        let ranges = lines.highlight_line(line, syntaxes()).ok()?;
        Some(format!(
            "{}\x1b[0m",
            as_24_bit_terminal_escaped(&ranges, false)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_language_is_coloured_and_keeps_its_text() {
        let mut code = Code::new("rust");
        let line = code.line("fn main() { let x = 1; }").unwrap();
        assert!(line.contains("\x1b[38;2;"), "{line:?}");
        let plain = String::from_utf8(strip(line.as_bytes())).unwrap();
        assert_eq!(plain, "fn main() { let x = 1; }");
        assert!(Code::new("no-such-language").line("x").is_none());
        assert!(Code::new("").line("x").is_none());
    }

    /// The text without escape sequences.
    fn strip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut escape = false;
        for &b in bytes {
            match (escape, b) {
                (false, 0x1b) => escape = true,
                (false, _) => out.push(b),
                (true, b'm') => escape = false,
                (true, _) => {}
            }
        }
        out
    }
}
