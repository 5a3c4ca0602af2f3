//! A reply's markdown rendered as it streams, a whole line at a time: code blocks are
//! highlighted line by line, table rows are held until the table ends, every other line is
//! styled on its own ([`crate::inline`]).

use crate::highlight::Code;
use crate::style::{self, Paint};
use crate::{inline, table};

/// An open code block.
struct Fence {
    /// The fence that closes it (three or more backticks or tildes).
    marker: String,
    code: Code,
}

/// The state of one reply's markdown.
pub struct Markdown {
    paint: Paint,
    fence: Option<Fence>,
    /// Table rows not shown yet.
    held: Vec<String>,
}

impl Markdown {
    /// A reply's start.
    pub fn new(paint: Paint) -> Markdown {
        Markdown {
            paint,
            fence: None,
            held: Vec::new(),
        }
    }

    /// Rows held back (a table being gathered), as they came.
    pub fn held(&self) -> &[String] {
        &self.held
    }

    /// The lines showing one whole line of the reply (none while a table is gathered).
    pub fn line(&mut self, line: &str, cols: usize) -> Vec<String> {
        if let Some(fence) = self.fence.as_mut() {
            let trimmed = line.trim();
            if trimmed.starts_with(&fence.marker)
                && trimmed.chars().all(|c| fence.marker.starts_with(c))
            {
                self.fence = None;
                return vec![self.paint.paint(style::FRAME, line)];
            }
            let shown = match self.paint.on() {
                true => fence
                    .code
                    .line(line)
                    .unwrap_or_else(|| self.paint.paint(style::CODE, line)),
                false => line.to_owned(),
            };
            return vec![shown];
        }
        if let Some((marker, lang)) = opening_fence(line) {
            let mut lines = self.flush(cols);
            let code = match self.paint.on() {
                true => Code::new(lang),
                false => Code::new(""),
            };
            self.fence = Some(Fence { marker, code });
            lines.push(self.paint.paint(style::FRAME, line));
            return lines;
        }
        if line.trim_start().starts_with('|') {
            self.held.push(line.to_owned());
            return Vec::new();
        }
        let mut lines = self.flush(cols);
        lines.push(inline::line(line, self.paint, cols));
        lines
    }

    /// The lines of what is held (a table), now that it has ended.
    pub fn flush(&mut self, cols: usize) -> Vec<String> {
        if self.held.is_empty() {
            return Vec::new();
        }
        let rows = std::mem::take(&mut self.held);
        table::render(&rows, self.paint, cols)
    }
}

/// The closing marker and the language of a line that opens a code block.
fn opening_fence(line: &str) -> Option<(String, &str)> {
    let trimmed = line.trim_start();
    let mark = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let marker: String = trimmed.chars().take_while(|c| *c == mark).collect();
    if marker.len() < 3 {
        return None;
    }
    let info = trimmed[marker.len()..].trim();
    // A backtick fence's info string holds no backtick (else it is inline code).
    if mark == '`' && info.contains('`') {
        return None;
    }
    Some((marker, info.split_whitespace().next().unwrap_or("")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::width::strip;

    fn shown(md: &mut Markdown, line: &str) -> Vec<String> {
        md.line(line, 80).iter().map(|l| strip(l)).collect()
    }

    #[test]
    fn a_code_block_is_highlighted_between_its_fences() {
        let mut md = Markdown::new(Paint::new(true));
        assert_eq!(shown(&mut md, "```rust"), ["```rust"]);
        let code = md.line("let x = 1; // **not bold**", 80);
        assert!(code[0].contains("\x1b[38;2;"), "{code:?}");
        assert_eq!(strip(&code[0]), "let x = 1; // **not bold**");
        assert_eq!(shown(&mut md, "```"), ["```"]);
        assert_eq!(shown(&mut md, "**bold**"), ["bold"]);
    }

    #[test]
    fn table_rows_are_held_until_the_table_ends() {
        let mut md = Markdown::new(Paint::new(false));
        assert!(shown(&mut md, "| a | b |").is_empty());
        assert!(shown(&mut md, "|---|---|").is_empty());
        assert_eq!(md.held().len(), 2);
        let after = shown(&mut md, "done");
        assert_eq!(after.first().map(String::as_str), Some("┌───┬───┐"));
        assert_eq!(after.last().map(String::as_str), Some("done"));
        assert!(md.held().is_empty());
    }

    #[test]
    fn fences_open_only_on_three_marks() {
        assert_eq!(opening_fence("```py extra"), Some(("```".into(), "py")));
        assert_eq!(opening_fence("~~~~"), Some(("~~~~".into(), "")));
        assert_eq!(opening_fence("``x``"), None);
        assert_eq!(opening_fence("```a`b"), None);
    }
}
