//! The line editor of a chat on a terminal (rustyline): a prompt, arrow keys and history
//! (kept in a file), and multi-line messages: a line ending in `\` goes on on the next
//! line, and a bracketed paste arrives whole as one message. Output is printed above the
//! prompt as the view writes it ([`crate::view`]: each write ends with a line break), so
//! the prompt stays usable while a reply streams.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use rustyline::error::ReadlineError;
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{ExternalPrinter, Helper, history::FileHistory};
use tokio::sync::mpsc;

use crate::style::{self, Paint};
use crate::width;

/// What the person at the terminal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// A message (continued lines joined with newlines).
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupt,
    /// Ctrl-D on an empty line.
    End,
}

/// Why the editor could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the line editor: {0}")]
pub struct EditorError(#[from] ReadlineError);

/// True when `line` asks to go on on the next line (it ends in a single `\`).
pub fn continues(line: &str) -> bool {
    let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
    trailing % 2 == 1
}

/// The message of an accepted buffer: each continuing `\` before a line break removed.
pub fn message(buffer: &str) -> String {
    let lines: Vec<&str> = buffer.split('\n').collect();
    let last = lines.len().saturating_sub(1);
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| match line.strip_suffix('\\') {
            Some(head) if i < last && continues(line) => head,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Keeps the buffer open while its last line continues, and colours the prompt and what is
/// typed.
struct Continuation {
    paint: Paint,
    /// The buffer as last shown (what a Ctrl-C leaves on the screen).
    shown: std::sync::Mutex<String>,
}

impl Validator for Continuation {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if continues(ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}
impl Helper for Continuation {}
impl rustyline::completion::Completer for Continuation {
    type Candidate = String;
}
impl rustyline::hint::Hinter for Continuation {
    type Hint = String;
}
impl Highlighter for Continuation {
    fn highlight<'l>(&self, line: &'l str, _pos: usize) -> Cow<'l, str> {
        if let Ok(mut shown) = self.shown.lock() {
            shown.clear();
            shown.push_str(line);
        }
        match self.paint.on() {
            true => Cow::Owned(self.paint.paint(style::INPUT, line)),
            false => Cow::Borrowed(line),
        }
    }

    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        match self.paint.on() {
            true => Cow::Owned(self.paint.paint(style::PROMPT, prompt)),
            false => Cow::Borrowed(prompt),
        }
    }

    fn highlight_char(&self, _line: &str, _pos: usize, _kind: CmdKind) -> bool {
        // Every change is drawn again through `highlight`, which keeps the buffer shown.
        true
    }
}

/// Told of each line entered, with the rows it took on the screen and the line as to show
/// it again (the prompt and the text, styled), before the next prompt shows.
pub type OnEnter = Arc<dyn Fn(usize, &str) + Send + Sync>;

/// A line editor opened but not reading yet (see [`Editor::read`]).
pub struct Editor {
    editor: rustyline::Editor<Continuation, FileHistory>,
    prompt: String,
    history: PathBuf,
    paint: Paint,
}

/// Opens the editor showing `prompt` (in colour with `paint`), with its history in
/// `history` (made with mode 0600). Returns it, and the output to print through (above the
/// prompt).
pub fn open(
    prompt: String,
    history: PathBuf,
    paint: Paint,
) -> Result<(Editor, Box<dyn io::Write + Send>), EditorError> {
    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .max_history_size(1000)?
        .build();
    let mut editor: rustyline::Editor<Continuation, FileHistory> =
        rustyline::Editor::with_config(config)?;
    editor.set_helper(Some(Continuation {
        paint,
        shown: std::sync::Mutex::new(String::new()),
    }));
    private_file(&history);
    // A missing file is a first start.
    let _ = editor.load_history(&history);
    let printer = editor.create_external_printer()?;
    let editor = Editor {
        editor,
        prompt,
        history,
        paint,
    };
    Ok((editor, Box::new(AbovePrompt(Box::new(printer)))))
}

impl Editor {
    /// Reads on a thread of its own until Ctrl-D or until no one listens; `on_enter` is told
    /// of each line entered.
    pub fn read(self, on_enter: OnEnter) -> Result<mpsc::Receiver<Typed>, EditorError> {
        let (tx, rx) = mpsc::channel(16);
        std::thread::Builder::new()
            .name("chela-editor".into())
            .spawn(move || read_lines(self, on_enter, tx))
            .map_err(|e| EditorError(ReadlineError::Io(e)))?;
        Ok(rx)
    }
}

/// The rows `prompt` and `buffer` took on a terminal `cols` wide (continued lines show
/// without the prompt).
pub fn entered_rows(prompt: &str, buffer: &str, cols: usize) -> usize {
    let lines: Vec<String> = buffer
        .split('\n')
        .enumerate()
        .map(|(i, line)| match i {
            0 => format!("{prompt}{line}"),
            _ => line.to_owned(),
        })
        .collect();
    let rows: usize = lines.iter().map(|line| width::rows(line, cols)).sum();
    // The editor moves to a row of its own when the text ends exactly at the edge.
    let last = lines.last().map_or(0, |line| width::columns(line));
    let at_edge = last > 0 && last.is_multiple_of(cols.max(1));
    rows + usize::from(at_edge)
}

/// Creates `path` empty with mode 0600 when it does not exist.
fn private_file(path: &std::path::Path) {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if let Err(e) = options.open(path) {
        tracing::warn!(error = %e, path = %path.display(), "cannot open the chat history");
    }
    // A history made earlier with looser rights is made private too (it holds what was typed).
    #[cfg(unix)]
    if let Err(e) =
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
    {
        tracing::warn!(error = %e, path = %path.display(), "cannot make the chat history private");
    }
}

/// The editor thread: reads until Ctrl-D or until no one listens.
fn read_lines(mut ed: Editor, on_enter: OnEnter, tx: mpsc::Sender<Typed>) {
    loop {
        let read = ed.editor.readline(&ed.prompt);
        // Whatever ended the read, the prompt and its line stay on the screen, a line down.
        let buffer = match &read {
            Ok(buffer) => buffer.clone(),
            Err(ReadlineError::Interrupted) => ed.shown(),
            Err(_) => String::new(),
        };
        let rows = entered_rows(&ed.prompt, &buffer, crate::terminal_cols());
        let echo = format!(
            "{}{}",
            ed.paint.paint(style::PROMPT, &ed.prompt),
            ed.paint.paint(style::INPUT, &buffer)
        );
        on_enter(rows, &echo);
        let typed = match read {
            Ok(buffer) if buffer.trim().is_empty() => continue,
            Ok(buffer) => {
                if ed
                    .editor
                    .add_history_entry(buffer.as_str())
                    .unwrap_or(false)
                {
                    let _ = ed.editor.append_history(&ed.history);
                }
                Typed::Line(message(&buffer))
            }
            Err(ReadlineError::Interrupted) => Typed::Interrupt,
            Err(_) => Typed::End,
        };
        let end = typed == Typed::End;
        if tx.blocking_send(typed).is_err() || end {
            return;
        }
    }
}

impl Editor {
    /// The buffer as the editor last showed it.
    fn shown(&self) -> String {
        self.editor
            .helper()
            .and_then(|helper| helper.shown.lock().ok().map(|shown| shown.clone()))
            .unwrap_or_default()
    }
}

/// Output printed above the editor's prompt, a write at a time (the view's writes each end
/// with a line break).
struct AbovePrompt(Box<dyn ExternalPrinter + Send>);

impl io::Write for AbovePrompt {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf).into_owned();
        self.0
            .print(text)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_trailing_backslash_continues() {
        assert!(continues("first line \\"));
        assert!(!continues("first line"));
        // An escaped backslash is text.
        assert!(!continues("C:\\\\"));
        assert!(continues("a\\\\\\"));
    }

    #[test]
    fn continued_lines_join_into_one_message() {
        assert_eq!(message("one \\\ntwo\\\nthree"), "one \ntwo\nthree");
        // A pasted block keeps its lines; a last backslash is kept.
        assert_eq!(message("a\nb\\"), "a\nb\\");
        assert_eq!(message("plain"), "plain");
    }

    #[test]
    fn an_entered_line_takes_the_rows_of_its_prompt_and_lines() {
        assert_eq!(entered_rows("> ", "hi", 80), 1);
        assert_eq!(entered_rows("> ", &"x".repeat(79), 80), 2);
        // Ending at the edge, the editor goes on to a row of its own.
        assert_eq!(entered_rows("> ", &"x".repeat(78), 80), 2);
        assert_eq!(entered_rows("> ", "", 80), 1);
        assert_eq!(entered_rows("> ", "one \\\ntwo", 80), 2);
    }
}
