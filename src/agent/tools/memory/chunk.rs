//! Splitting a memory file into chunks for the index: a heading starts a chunk, a blank line
//! ends one that has reached [`TARGET_WORDS`], and no chunk grows past [`MAX_WORDS`].

/// Words after which a paragraph break ends the chunk.
pub const TARGET_WORDS: usize = 150;
/// Words after which any line break ends the chunk.
pub const MAX_WORDS: usize = 400;

/// A run of lines of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based, inclusive.
    pub end_line: usize,
    /// The lines, joined with `\n`.
    pub text: String,
    /// The heading the chunk is under (its own first line when it starts with one).
    pub heading: Option<String>,
}

/// A chunk being gathered.
#[derive(Default)]
struct Open {
    start: usize,
    lines: Vec<String>,
    words: usize,
}

/// The chunks of `text`; chunks of blank lines only are left out.
pub fn chunks(text: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut open = Open::default();
    let mut heading: Option<String> = None;
    let mut chunk_heading: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim();
        let is_heading = trimmed.starts_with('#');
        if is_heading {
            close(&mut out, &mut open, chunk_heading.take());
            heading = Some(trimmed.trim_start_matches('#').trim().to_owned());
        }
        if trimmed.is_empty() {
            if open.words >= TARGET_WORDS {
                close(&mut out, &mut open, chunk_heading.take());
            }
            if open.lines.is_empty() {
                continue;
            }
        }
        if open.lines.is_empty() {
            open.start = number;
            chunk_heading = heading.clone();
        }
        open.lines.push(line.to_owned());
        open.words += trimmed.split_whitespace().count();
        if open.words >= MAX_WORDS {
            close(&mut out, &mut open, chunk_heading.take());
        }
    }
    close(&mut out, &mut open, chunk_heading);
    out
}

/// Ends the open chunk (trailing blank lines left out) and pushes it unless it is blank.
fn close(out: &mut Vec<Chunk>, open: &mut Open, heading: Option<String>) {
    let taken = std::mem::take(open);
    let mut lines = taken.lines;
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    if lines.is_empty() {
        return;
    }
    out.push(Chunk {
        start_line: taken.start,
        end_line: taken.start + lines.len() - 1,
        text: lines.join("\n"),
        heading,
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(usize, usize)> {
        chunks(text)
            .iter()
            .map(|c| (c.start_line, c.end_line))
            .collect()
    }

    #[test]
    fn headings_start_chunks_and_blank_lines_are_trimmed() {
        let text = "intro line\n\n# Alpha\nalpha one\n\nalpha two\n\n\n## Beta\nbeta\n\n";
        let c = chunks(text);
        assert_eq!(spans(text), [(1, 1), (3, 6), (9, 10)]);
        assert_eq!(c[1].text, "# Alpha\nalpha one\n\nalpha two");
        assert_eq!(c[0].heading, None);
        assert_eq!(c[1].heading.as_deref(), Some("Alpha"));
        assert_eq!(c[2].heading.as_deref(), Some("Beta"));
        assert!(chunks("\n\n  \n").is_empty());
    }

    #[test]
    fn long_sections_split_at_paragraphs_then_at_any_line() {
        let para = format!("{}\n", "word ".repeat(100));
        // Two paragraphs of 100 words: the second blank line closes at 200 >= TARGET_WORDS.
        let text = format!("# H\n{para}\n{para}\n{para}");
        let c = chunks(&text);
        assert_eq!(spans(&text), [(1, 4), (6, 6)]);
        assert_eq!(
            c[1].heading.as_deref(),
            Some("H"),
            "a later chunk keeps its heading"
        );
        // One paragraph of 1,000 words on 10 lines: cut every 400 words.
        let text = "word ".repeat(100) + "\n";
        let text = text.repeat(10);
        assert_eq!(spans(&text), [(1, 4), (5, 8), (9, 10)]);
        for chunk in chunks(&text) {
            assert!(chunk.text.split_whitespace().count() <= MAX_WORDS);
        }
    }
}
