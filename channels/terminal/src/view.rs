//! What the terminal shows, as text to write. Two kinds:
//! - **plain** (output that is not a terminal): the reply's text as it comes and notes on
//!   lines of their own, nothing else (a script reads exactly the reply);
//! - **live** (a terminal): whole lines of the reply rendered as markdown, and below them a
//!   live part rewritten in place: the line still being written, held table rows, and a
//!   spinner with the time waited while the model thinks or a tool runs. Every write ends
//!   with a line break, so a line editor's prompt always sits below it; the next write first
//!   clears the live part (the cursor goes back up the rows it took).

use std::time::{Duration, Instant};

use anstyle::Style;

use crate::markdown::Markdown;
use crate::style::{self, Paint};
use crate::width;

/// The frames of the spinner.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// What a note is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// The chat's own words (banner, usage).
    Info,
    /// A tool call.
    Tool,
    /// Something went wrong.
    Error,
}

impl Note {
    fn style(self) -> Style {
        match self {
            Note::Info => style::NOTE,
            Note::Tool => style::TOOL,
            Note::Error => style::ERROR,
        }
    }
}

/// The spinner: what is waited for, since when.
struct Spinner {
    label: String,
    since: Instant,
    frame: usize,
}

/// The screen's state; every method returns the text to write (maybe empty).
pub struct View {
    live: bool,
    paint: Paint,
    md: Markdown,
    /// The reply's line not ended yet.
    partial: String,
    /// Plain: a reply's line is open on the screen.
    open: bool,
    spinner: Option<Spinner>,
    /// Rows the live part takes on the screen.
    rows: usize,
    /// The terminal's columns and rows, asked at each write.
    size: fn() -> (usize, usize),
}

impl View {
    /// The plain view (not a terminal).
    pub fn plain() -> View {
        View::new(false, Paint::new(false), || (usize::MAX, usize::MAX))
    }

    /// The live view of a terminal, `size` telling its columns and rows.
    pub fn live(paint: Paint, size: fn() -> (usize, usize)) -> View {
        View::new(true, paint, size)
    }

    fn new(live: bool, paint: Paint, size: fn() -> (usize, usize)) -> View {
        View {
            live,
            paint,
            md: Markdown::new(paint),
            partial: String::new(),
            open: false,
            spinner: None,
            rows: 0,
            size,
        }
    }

    /// Whether this is the live view of a terminal.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Its colours.
    pub fn paint(&self) -> Paint {
        self.paint
    }

    /// More of the reply's text.
    pub fn text(&mut self, delta: &str) -> String {
        if delta.is_empty() {
            return String::new();
        }
        if !self.live {
            self.open = true;
            return delta.to_owned();
        }
        // No control character reaches the terminal but line breaks and tabs: a reply cannot
        // move the cursor, retitle the window or hide what it wrote.
        self.partial.extend(
            delta
                .chars()
                .filter(|c| !c.is_control() || matches!(c, '\n' | '\t')),
        );
        let (cols, _) = (self.size)();
        let mut done = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            done.extend(self.md.line(line.trim_end_matches(['\n', '\r']), cols));
        }
        done.extend(self.outgrown());
        self.redraw(done)
    }

    /// The reply has ended: its last line and any held rows are shown.
    pub fn end(&mut self) -> String {
        if !self.live {
            let end = if self.open { "\n" } else { "" };
            self.open = false;
            return end.to_owned();
        }
        let done = self.settle();
        self.md = Markdown::new(self.paint);
        self.redraw(done)
    }

    /// `line` on a line of its own below what the reply has shown so far.
    pub fn note(&mut self, kind: Note, line: &str) -> String {
        if !self.live {
            let lead = if self.open { "\n" } else { "" };
            self.open = false;
            return format!("{lead}{line}\n");
        }
        let mut done = self.settle();
        done.push(self.paint.paint(kind.style(), line));
        self.redraw(done)
    }

    /// Shows the spinner, waiting for `label` (its time counts from `since`).
    pub fn spin(&mut self, label: &str, since: Instant) -> String {
        if !self.live {
            return String::new();
        }
        let same = self.spinner.as_ref().is_some_and(|s| s.label == label);
        if !same {
            self.spinner = Some(Spinner {
                label: label.to_owned(),
                since,
                frame: 0,
            });
        }
        self.redraw(Vec::new())
    }

    /// Takes the spinner away.
    pub fn unspin(&mut self) -> String {
        if self.spinner.take().is_none() {
            return String::new();
        }
        self.redraw(Vec::new())
    }

    /// Whether the spinner shows.
    pub fn spinning(&self) -> bool {
        self.spinner.is_some()
    }

    /// The spinner's next frame (empty when it does not show).
    pub fn tick(&mut self) -> String {
        match self.spinner.as_mut() {
            Some(spinner) => spinner.frame = (spinner.frame + 1) % FRAMES.len(),
            None => return String::new(),
        }
        self.redraw(Vec::new())
    }

    /// A line the person entered, cleared from below the live part, shown again (`echo`)
    /// above it.
    pub fn entered(&mut self, echo: &str) -> String {
        if !self.live {
            return String::new();
        }
        self.redraw(vec![echo.to_owned()])
    }

    /// The rows the live part may take: half the terminal (at least 3), so it is never
    /// taller than the screen (the cursor cannot go up past its top) and a long line costs
    /// little to draw again.
    fn budget(&self) -> usize {
        let (_, height) = (self.size)();
        (height / 2).max(3)
    }

    /// What has outgrown the live part, as finished lines: the held table rows (drawn as a
    /// table of their own), and the first whole rows of a line longer than the budget (as
    /// written: its markdown is not rendered).
    fn outgrown(&mut self) -> Vec<String> {
        let (cols, _) = (self.size)();
        let budget = self.budget();
        let mut done = Vec::new();
        let held: usize = self
            .md
            .held()
            .iter()
            .map(|row| width::rows(row, cols))
            .sum();
        if held > budget / 2 {
            done.extend(self.md.flush(cols));
        }
        // A row for the spinner.
        let keep = budget.saturating_sub(1).max(1);
        let partial = width::expand_tabs(&self.partial);
        let total = width::rows(&partial, cols);
        if total > keep {
            let (_, cut) = width::wrap(&partial, cols, total - keep);
            if cut > 0 && cut < partial.len() {
                done.push(partial[..cut].to_owned());
                self.partial = partial[cut..].to_owned();
            }
        }
        done
    }

    /// The reply's partial line and held rows, as finished lines.
    fn settle(&mut self) -> Vec<String> {
        let (cols, _) = (self.size)();
        let mut done = Vec::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            done.extend(self.md.line(&line, cols));
        }
        done.extend(self.md.flush(cols));
        done
    }

    /// Clears the live part, writes `done`, then draws the live part again.
    fn redraw(&mut self, done: Vec<String>) -> String {
        let (cols, _) = (self.size)();
        let mut out = String::new();
        let cleared = self.rows > 0;
        if cleared {
            out.push_str(&format!("\x1b[{}A\r\x1b[J", self.rows));
        }
        for line in &done {
            out.push_str(line);
            out.push('\n');
        }
        let live = self.live_lines();
        self.rows = live.iter().map(|line| width::rows(line, cols)).sum();
        for line in &live {
            out.push_str(line);
            out.push('\n');
        }
        if cleared && done.is_empty() && live.is_empty() {
            // Only cleared: every write ends a line (a line editor adds the break itself),
            // so an empty row is left; it is the live part now, cleared by the next write.
            out.push('\n');
            self.rows = 1;
        }
        out
    }

    /// The lines of the live part.
    fn live_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .md
            .held()
            .iter()
            .map(|row| width::expand_tabs(row))
            .collect();
        if !self.partial.is_empty() {
            lines.push(width::expand_tabs(&self.partial));
        }
        if let Some(spinner) = &self.spinner {
            let waited = spinner.since.elapsed();
            let frame = FRAMES[spinner.frame % FRAMES.len()];
            let text = format!("{frame} {} {}", spinner.label, seconds(waited));
            lines.push(self.paint.paint(style::NOTE, &text));
        }
        lines
    }
}

/// `1.2s`.
fn seconds(waited: Duration) -> String {
    format!("{:.1}s", waited.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::width::strip;

    fn eighty() -> (usize, usize) {
        (80, 24)
    }

    #[test]
    fn plain_shows_the_text_as_it_comes_and_notes_on_their_own_lines() {
        let mut view = View::plain();
        let mut out = view.text("Hel");
        out += &view.text("lo **there**");
        out += &view.spin("thinking", Instant::now());
        out += &view.note(Note::Tool, "🔧 exec  ls");
        out += &view.text("more");
        out += &view.end();
        assert_eq!(out, "Hello **there**\n🔧 exec  ls\nmore\n");
    }

    #[test]
    fn live_rewrites_the_partial_line_and_renders_whole_lines() {
        let mut view = View::live(Paint::new(false), eighty);
        let first = view.text("# Ti");
        assert_eq!(first, "# Ti\n");
        let second = view.text("tle\nSome **bo");
        // Up one row, clear, the heading rendered, the new partial line raw.
        assert_eq!(second, "\x1b[1A\r\x1b[JTitle\nSome **bo\n");
        let end = view.text("ld**");
        assert_eq!(end, "\x1b[1A\r\x1b[JSome **bold**\n");
        assert_eq!(view.end(), "\x1b[1A\r\x1b[JSome bold\n");
        assert_eq!(view.end(), "");
    }

    #[test]
    fn the_spinner_sits_below_the_text_and_goes() {
        let mut view = View::live(Paint::new(false), eighty);
        let since = Instant::now() - Duration::from_millis(1500);
        let spun = view.spin("thinking", since);
        assert!(spun.starts_with("⠋ thinking 1.5s"), "{spun:?}");
        let ticked = view.tick();
        assert!(
            ticked.starts_with("\x1b[1A\r\x1b[J⠙ thinking 1."),
            "{ticked:?}"
        );
        let text = view.text("Hi");
        assert!(
            text.starts_with("\x1b[1A\r\x1b[JHi\n⠙ thinking"),
            "{text:?}"
        );
        assert_eq!(view.unspin(), "\x1b[2A\r\x1b[JHi\n");
        assert_eq!(view.tick(), "");
    }

    #[test]
    fn a_note_ends_the_partial_line_first() {
        let mut view = View::live(Paint::new(true), eighty);
        view.text("Looking");
        let noted = view.note(Note::Tool, "🔧 exec  ls -la");
        assert!(noted.starts_with("\x1b[1A\r\x1b[JLooking\n"), "{noted:?}");
        assert!(noted.contains("\x1b[33m🔧 exec  ls -la"), "{noted:?}");
        assert_eq!(
            strip(&noted),
            "\r\x1b[JLooking\n🔧 exec  ls -la\n".replace("\r\x1b[J", "\r")
        );
    }

    #[test]
    fn a_line_longer_than_the_live_part_is_finished_a_row_at_a_time() {
        // 80 x 24: 12 rows live, one of them for the spinner.
        let mut view = View::live(Paint::new(false), eighty);
        let out = view.text(&"w".repeat(80 * 10 + 5));
        assert!(!out.contains("\x1b["), "nothing to clear yet: {out:?}");
        assert_eq!(view.rows, 11);
        let out = view.text(&"w".repeat(80));
        // The first row is finished as written, the last 11 stay live.
        assert!(
            out.starts_with(&format!("\x1b[11A\r\x1b[J{}\n", "w".repeat(80))),
            "{out:?}"
        );
        assert_eq!(view.rows, 11);
        assert_eq!(view.partial.len(), 80 * 10 + 5);
    }

    #[test]
    fn a_table_taller_than_the_live_part_is_drawn_as_it_grows() {
        let mut view = View::live(Paint::new(false), eighty);
        let mut out = view.text("| a | b |\n|---|---|\n");
        for i in 0..6 {
            out += &view.text(&format!("| {i} | x |\n"));
        }
        assert!(out.contains("┌───┬───┐"), "{out:?}");
        assert!(view.md.held().len() <= 6, "{:?}", view.md.held());
    }

    #[test]
    fn control_characters_of_a_reply_never_reach_the_terminal() {
        let mut view = View::live(Paint::new(false), eighty);
        let out = view.text("a\x1b]0;owned\x07b\rc\n");
        assert_eq!(out, "a]0;ownedbc\n");
    }

    #[test]
    fn clearing_alone_leaves_an_empty_row_the_next_write_clears() {
        let mut view = View::live(Paint::new(false), eighty);
        view.spin("thinking", Instant::now());
        assert_eq!(view.unspin(), "\x1b[1A\r\x1b[J\n");
        assert_eq!(view.text("Hi"), "\x1b[1A\r\x1b[JHi\n");
    }

    #[test]
    fn an_entered_line_is_cleared_with_the_live_part_and_shown_above_it() {
        let mut view = View::live(Paint::new(false), eighty);
        view.text("partial");
        assert_eq!(view.entered("> hi"), "\x1b[1A\r\x1b[J> hi\npartial\n");
        // Nothing live: the line shows where it was.
        let mut idle = View::live(Paint::new(false), eighty);
        assert_eq!(idle.entered("> hi"), "> hi\n");
    }
}
