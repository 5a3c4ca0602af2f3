//! The line editor of a `chela chat` on a terminal (rustyline): a prompt, arrow keys and
//! history (kept in a file), and multi-line messages: a line ending in `\` goes on on the
//! next line, and a bracketed paste arrives whole as one message. Output is printed above
//! the prompt, a line at a time.

use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustyline::error::ReadlineError;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{ExternalPrinter, Helper, history::FileHistory};
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

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

/// Keeps the buffer open while its last line continues.
struct Continuation;

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
impl rustyline::highlight::Highlighter for Continuation {}

/// Starts the editor on a thread of its own, showing `prompt`, with its history in
/// `history` (made with mode 0600). Returns what is typed, and the output to print through
/// (above the prompt).
pub fn start(
    prompt: String,
    history: PathBuf,
) -> Result<(mpsc::Receiver<Typed>, Box<dyn AsyncWrite + Send + Unpin>), EditorError> {
    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .max_history_size(1000)?
        .build();
    let mut editor: rustyline::Editor<Continuation, FileHistory> =
        rustyline::Editor::with_config(config)?;
    editor.set_helper(Some(Continuation));
    private_file(&history);
    // A missing file is a first start.
    let _ = editor.load_history(&history);
    let printer = editor.create_external_printer()?;
    let (tx, rx) = mpsc::channel(16);
    std::thread::Builder::new()
        .name("chela-editor".into())
        .spawn(move || read_lines(editor, &prompt, &history, tx))
        .map_err(|e| EditorError(ReadlineError::Io(e)))?;
    let out = AbovePrompt {
        printer: Box::new(printer),
        pending: String::new(),
    };
    Ok((rx, Box::new(out)))
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
fn read_lines(
    mut editor: rustyline::Editor<Continuation, FileHistory>,
    prompt: &str,
    history: &std::path::Path,
    tx: mpsc::Sender<Typed>,
) {
    loop {
        let typed = match editor.readline(prompt) {
            Ok(buffer) if buffer.trim().is_empty() => continue,
            Ok(buffer) => {
                if editor.add_history_entry(buffer.as_str()).unwrap_or(false) {
                    let _ = editor.append_history(history);
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

/// Output printed above the editor's prompt, by whole lines.
struct AbovePrompt {
    printer: Box<dyn ExternalPrinter + Send>,
    pending: String,
}

impl AsyncWrite for AbovePrompt {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.pending.push_str(&String::from_utf8_lossy(buf));
        while let Some(end) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=end).collect();
            self.printer
                .print(line)
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
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
}
