//! chela-terminal: the terminal channel. Each line read from stdin is one message from the
//! local user; replies stream to stdout as they are generated (an edit prints only the new
//! text), and a finished reply ends its line. On a terminal the reply is rendered as
//! markdown as it streams, with a spinner while waiting and colours ([`view`]).

pub mod editor;
mod highlight;
mod inline;
mod markdown;
pub mod style;
mod table;
pub mod view;
pub mod width;
mod writer;

#[cfg(test)]
mod kept;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, Inbound, InboundSink, Limits, Sender,
    SentMessage,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

pub use view::Note;
use view::View;

/// The channel name in session keys and conversations.
pub const NAME: &str = "terminal";

/// Longest wait for what is queued to reach the terminal.
const SETTLE: Duration = Duration::from_secs(5);

/// How often the spinner turns.
const TICK: Duration = Duration::from_millis(120);

/// The width of the terminal on stdout (80 when it cannot be told).
pub fn terminal_cols() -> usize {
    terminal_dimensions().0
}

/// The columns and rows of the terminal on stdout (80 x 24 when they cannot be told).
pub fn terminal_dimensions() -> (usize, usize) {
    terminal_size::terminal_size().map_or((80, 24), |(w, h)| (usize::from(w.0), usize::from(h.0)))
}

/// The message being streamed, and what of it has been shown.
#[derive(Default)]
struct Shown {
    current: Option<String>,
    printed: String,
    /// Notes that wait for the reply's end.
    after: Vec<(Note, String)>,
}

/// Where the terminal writes: a writer thread, or (when none could start) the output itself.
enum Out {
    Thread(writer::Writer),
    Direct(writer::Shared),
}

impl Out {
    fn new(out: Box<dyn Write + Send>) -> Out {
        let out: writer::Shared = Arc::new(Mutex::new(out));
        match writer::Writer::start(out.clone()) {
            Some(writer) => Out::Thread(writer),
            None => Out::Direct(out),
        }
    }

    /// Writes `text` (queues it, with a thread).
    fn write(&self, text: String) -> Result<(), ChannelError> {
        match self {
            Out::Thread(writer) => writer.write(text).map_err(ChannelError::Transport),
            Out::Direct(out) => {
                let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
                out.write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| ChannelError::Transport(e.to_string()))
            }
        }
    }
}

/// Where the terminal writes, and what it shows.
struct Screen {
    out: Out,
    view: View,
    shown: Shown,
}

/// Where the terminal's lines come from, and how they are handed on.
pub enum Input {
    /// Lines read from stdin, each handed on as soon as it is read: a message typed during a
    /// run steers it or waits in the queue, a command overtakes them (a chat by hand).
    Stdin,
    /// Lines read from stdin and handled in input order: a command answers before the next
    /// line is read ([`InboundSink::accept_in_order`]; a script piped in).
    StdinInOrder,
    /// Lines handed in by the caller (a line editor on a TTY), each as soon as it comes.
    Lines(tokio::sync::mpsc::Receiver<String>),
}

/// The terminal channel.
pub struct TerminalChannel {
    user: String,
    screen: Mutex<Screen>,
    next_id: AtomicU64,
    quiet: bool,
    input: Mutex<Option<Input>>,
    /// Lines handed on in order before the input (`chat --new`, `--model`).
    preface: Mutex<Vec<String>>,
    /// When quiet: each message sent, by id, with its latest text (see [`TerminalChannel::said`]).
    said: Mutex<Vec<(String, String)>>,
    /// The task turning the spinner, while it shows.
    ticker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Most messages a quiet terminal keeps for [`TerminalChannel::said`].
const SAID_MAX: usize = 64;

impl TerminalChannel {
    /// A terminal channel for `user`, printing plain text to stdout.
    pub fn new(user: impl Into<String>) -> Arc<Self> {
        Self::with_output(user, Box::new(std::io::stdout()), false)
    }

    /// A terminal channel that prints nothing (for `chela agent --json`).
    pub fn quiet(user: impl Into<String>) -> Arc<Self> {
        Self::with_output(user, Box::new(std::io::sink()), true)
    }

    /// A terminal channel writing plain text to `out` (tests).
    pub fn with_output(
        user: impl Into<String>,
        out: Box<dyn Write + Send>,
        quiet: bool,
    ) -> Arc<Self> {
        Self::build(user.into(), out, View::plain(), quiet)
    }

    /// A terminal channel showing a person at a terminal what happens through `out` (stdout,
    /// or a line editor's printer): replies rendered as they stream, a spinner, colours when
    /// `paint` says so.
    pub fn live(
        user: impl Into<String>,
        out: Box<dyn Write + Send>,
        paint: style::Paint,
    ) -> Arc<Self> {
        Self::build(
            user.into(),
            out,
            View::live(paint, terminal_dimensions),
            false,
        )
    }

    fn build(user: String, out: Box<dyn Write + Send>, view: View, quiet: bool) -> Arc<Self> {
        Arc::new(TerminalChannel {
            user,
            screen: Mutex::new(Screen {
                out: Out::new(out),
                view,
                shown: Shown::default(),
            }),
            next_id: AtomicU64::new(1),
            quiet,
            input: Mutex::new(Some(Input::Stdin)),
            preface: Mutex::new(Vec::new()),
            said: Mutex::new(Vec::new()),
            ticker: Mutex::new(None),
        })
    }

    /// Whether this terminal shows a person what happens (see [`TerminalChannel::live`]).
    pub fn is_live(&self) -> bool {
        self.show(|view, _| (view.is_live(), String::new()))
            .unwrap_or(false)
    }

    /// Its colours.
    pub fn paint(&self) -> style::Paint {
        self.show(|view, _| (view.paint(), String::new()))
            .unwrap_or(style::Paint::new(false))
    }

    /// The text of each message a quiet terminal was asked to show, oldest first, as last
    /// edited (at most the last 64): `chela agent --json` prints a command's answer, which
    /// comes without a run. Empty when not quiet.
    pub fn said(&self) -> Vec<String> {
        let said = self.said.lock().unwrap_or_else(PoisonError::into_inner);
        said.iter().map(|(_, text)| text.clone()).collect()
    }

    /// Keeps `text` as the latest of message `id` when quiet.
    fn keep(&self, id: &str, text: &str) {
        if !self.quiet {
            return;
        }
        let mut said = self.said.lock().unwrap_or_else(PoisonError::into_inner);
        match said.iter_mut().find(|(kept, _)| kept == id) {
            Some((_, kept)) => *kept = text.to_owned(),
            None => {
                if said.len() == SAID_MAX {
                    said.remove(0);
                }
                said.push((id.to_owned(), text.to_owned()));
            }
        }
    }

    /// Sets where [`Channel::run`] reads its lines (default [`Input::Stdin`]); `preface`
    /// lines are handed on first, in order, each once the one before has been handled.
    pub fn set_input(&self, input: Input, preface: Vec<String>) {
        if let Ok(mut slot) = self.input.lock() {
            *slot = Some(input);
        }
        if let Ok(mut slot) = self.preface.lock() {
            *slot = preface;
        }
    }

    /// Prints `line` on a line of its own between the reply's text (the chat's own words).
    pub async fn note(&self, line: &str) -> Result<(), ChannelError> {
        self.note_as(Note::Info, line)
    }

    /// Prints `line` on a line of its own, coloured as `kind`.
    pub fn note_as(&self, kind: Note, line: &str) -> Result<(), ChannelError> {
        // The reply goes on below the note, on a new line, with what it had not shown.
        self.show(|view, _| (Ok(()), view.note(kind, line)))?
    }

    /// Shows the spinner waiting for `label` (time counted from now), turning until
    /// [`TerminalChannel::unspin`]; nothing off a terminal.
    pub fn spin(self: &Arc<Self>, label: &str) {
        let now = Instant::now();
        let _ = self.show(|view, _| ((), view.spin(label, now)));
        let mut ticker = self.ticker.lock().unwrap_or_else(PoisonError::into_inner);
        if ticker.as_ref().is_some_and(|t| !t.is_finished()) || !self.is_live() {
            return;
        }
        let terminal = Arc::downgrade(self);
        *ticker = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                let Some(terminal) = terminal.upgrade() else {
                    return;
                };
                let turning = terminal.show(|view, _| (view.spinning(), view.tick()));
                if !matches!(turning, Ok(true)) {
                    return;
                }
            }
        }));
    }

    /// More text of a reply that comes from elsewhere than this channel's messages (a chat
    /// through a gateway's RPC), shown as it streams.
    pub fn stream(&self, delta: &str) {
        let _ = self.show(|view, _| ((), view.text(delta)));
    }

    /// The reply [`TerminalChannel::stream`] showed has ended.
    pub fn end_stream(&self) {
        let _ = self.show(|view, _| ((), view.end()));
    }

    /// `line` on a line of its own as `kind` once the reply being shown has ended (at once
    /// when none is).
    pub fn note_after_reply(&self, kind: Note, line: &str) {
        let _ = self.show(|view, shown| match shown.current.is_some() {
            true => {
                shown.after.push((kind, line.to_owned()));
                ((), String::new())
            }
            false => ((), view.note(kind, line)),
        });
    }

    /// Takes the spinner away.
    pub fn unspin(&self) {
        let _ = self.show(|view, _| ((), view.unspin()));
    }

    /// A line the person entered at the editor took the `rows` rows above the cursor (see
    /// [`editor::OnEnter`]; called before the editor reads again): they are cleared at once,
    /// so the live part is right above the prompt again as every queued write expects, and
    /// the line is shown again (`echo`) above the live part, in its turn.
    pub fn entered(&self, rows: usize, echo: &str) {
        if !self.is_live() || rows == 0 {
            return;
        }
        let clear = format!("\x1b[{rows}A\r\x1b[J");
        {
            let screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
            match &screen.out {
                Out::Thread(writer) => writer.hold(&clear),
                Out::Direct(out) => {
                    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
                    let _ = out.write_all(clear.as_bytes()).and_then(|()| out.flush());
                }
            }
        }
        let _ = self.show(|view, _| ((), view.entered(echo)));
    }

    /// Hands one line on; a refused line is said on the screen.
    async fn hand_on(&self, sink: &dyn InboundSink, line: &str, in_order: bool) {
        let inbound = self.inbound(line.trim_end());
        let accepted = if in_order {
            sink.accept_in_order(inbound).await
        } else {
            sink.accept(inbound).await
        };
        if let Err(e) = accepted {
            let _ = self.note_as(Note::Error, &format!("[chela] message not accepted: {e}"));
        }
    }

    /// The conversation of the local user.
    pub fn conversation(&self) -> Conversation {
        Conversation {
            channel: NAME.into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: self.user.clone(),
            thread_id: None,
        }
    }

    /// A normalized message from the local user.
    pub fn inbound(&self, text: &str) -> Inbound {
        let now = now_ms();
        Inbound {
            conversation: self.conversation(),
            sender: Sender {
                id: self.user.clone(),
                name: self.user.clone(),
                username: None,
            },
            // Unique across restarts, so dedupe never drops a new line as an old one.
            message_id: format!("{now}-{}", self.next_id.fetch_add(1, Ordering::Relaxed)),
            text: text.to_string(),
            reply_to: None,
            mentioned: true,
            timestamp_ms: now,
            interaction: None,
            attachments: Vec::new(),
        }
    }

    /// Changes what is shown with `f` (which returns its answer and the text to write), then
    /// writes that text in one piece.
    fn show<T>(
        &self,
        f: impl FnOnce(&mut View, &mut Shown) -> (T, String),
    ) -> Result<T, ChannelError> {
        let mut screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
        let Screen { out, view, shown } = &mut *screen;
        let (answer, text) = f(view, shown);
        if self.quiet || text.is_empty() {
            return Ok(answer);
        }
        out.write(text)?;
        Ok(answer)
    }

    /// Waits (at most 5 s) until everything shown so far is on the terminal: before the
    /// process exits, and for tests.
    pub fn settle(&self) {
        let screen = self.screen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Out::Thread(writer) = &screen.out {
            let writer = writer.clone();
            drop(screen);
            writer.settle(SETTLE);
        }
    }
}

impl Channel for TerminalChannel {
    fn name(&self) -> &str {
        NAME
    }

    fn limits(&self) -> Limits {
        Limits {
            max_chars: 1 << 20,
            max_lines: None,
            edit_interval_ms: 0,
            group_edit_interval_ms: 0,
            threads: false,
        }
    }

    fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            let input = self.input.lock().ok().and_then(|mut slot| slot.take());
            let preface = self
                .preface
                .lock()
                .map(|mut p| std::mem::take(&mut *p))
                .unwrap_or_default();
            for line in preface {
                self.hand_on(sink.as_ref(), &line, true).await;
            }
            match input {
                None => Ok(()),
                Some(Input::Lines(mut rx)) => loop {
                    let line = tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        line = rx.recv() => line,
                    };
                    match line {
                        Some(line) if line.trim().is_empty() => continue,
                        Some(line) => self.hand_on(sink.as_ref(), &line, false).await,
                        None => return Ok(()),
                    }
                },
                Some(stdin) => {
                    let in_order = matches!(stdin, Input::StdinInOrder);
                    let mut lines = BufReader::new(tokio::io::stdin()).lines();
                    loop {
                        let line = tokio::select! {
                            _ = shutdown.cancelled() => return Ok(()),
                            line = lines.next_line() => line,
                        };
                        match line {
                            Ok(Some(line)) if line.trim().is_empty() => continue,
                            Ok(Some(line)) => self.hand_on(sink.as_ref(), &line, in_order).await,
                            Ok(None) => return Ok(()),
                            Err(e) => return Err(ChannelError::Transport(e.to_string())),
                        }
                    }
                }
            }
        })
    }

    fn send<'a>(
        &'a self,
        _to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
            self.keep(&id, text);
            let new_id = id.clone();
            self.show(move |view, shown| {
                // A new message starts on a line of its own.
                let mut out = match shown.current.is_some() {
                    true => view.end(),
                    false => String::new(),
                };
                shown.current = Some(new_id);
                shown.printed = text.to_string();
                out.push_str(&view.text(text));
                ((), out)
            })?;
            Ok(SentMessage { message_id: id })
        })
    }

    fn edit<'a>(
        &'a self,
        _to: &'a Conversation,
        message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.keep(&message.message_id, text);
            self.show(|view, shown| {
                let same = shown.current.as_deref() == Some(message.message_id.as_str());
                let out = if same && text.starts_with(&shown.printed) {
                    view.text(&text[shown.printed.len()..])
                } else {
                    // A terminal cannot rewrite what scrolled by: show the new text whole.
                    let mut out = view.end();
                    out.push_str(&view.text(text));
                    out
                };
                shown.current = Some(message.message_id.clone());
                shown.printed = text.to_string();
                ((), out)
            })
        })
    }

    fn reply_done<'a>(&'a self, _to: &'a Conversation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.show(|view, shown| {
                let mut out = view.end();
                for (kind, line) in std::mem::take(shown).after {
                    out.push_str(&view.note(kind, &line));
                }
                ((), out)
            });
        })
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kept::Kept;

    #[tokio::test]
    async fn edits_print_only_new_text_and_done_ends_the_line() {
        let kept = Kept::default();
        let term = TerminalChannel::with_output("me", Box::new(kept.clone()), false);
        let to = term.conversation();
        let sent = term.send(&to, "Hel").await.unwrap();
        term.edit(&to, &sent, "Hello").await.unwrap();
        term.edit(&to, &sent, "Hello, world").await.unwrap();
        term.reply_done(&to).await;
        term.settle();
        assert_eq!(kept.text(), "Hello, world\n");
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_terminal_renders_the_reply_and_turns_a_spinner_while_waiting() {
        let kept = Kept::default();
        let term = TerminalChannel::live("me", Box::new(kept.clone()), style::Paint::new(false));
        let to = term.conversation();
        term.spin("thinking");
        let sent = term.send(&to, "# Tit").await.unwrap();
        tokio::time::sleep(TICK * 3).await;
        term.settle();
        assert!(
            kept.text().contains('⠙'),
            "the spinner turned: {:?}",
            kept.text()
        );
        term.unspin();
        term.edit(&to, &sent, "# Title\n- **one**").await.unwrap();
        term.reply_done(&to).await;
        term.settle();
        let shown = width::strip(&kept.text());
        assert!(shown.contains("\rTitle\n"), "{shown:?}");
        assert!(shown.ends_with("\r• one\n"), "{shown:?}");
        let before = kept.text().len();
        tokio::time::sleep(TICK * 3).await;
        term.settle();
        assert_eq!(kept.text().len(), before, "the spinner stopped turning");
    }

    #[tokio::test]
    async fn a_quiet_terminal_keeps_what_it_was_asked_to_show() {
        let term = TerminalChannel::quiet("me");
        let to = term.conversation();
        let first = term.send(&to, "Hel").await.unwrap();
        term.edit(&to, &first, "Hello").await.unwrap();
        term.send(&to, "again").await.unwrap();
        assert_eq!(term.said(), ["Hello", "again"]);
        let loud = TerminalChannel::with_output("me", Box::new(std::io::sink()), false);
        loud.send(&to, "x").await.unwrap();
        assert!(loud.said().is_empty());
    }

    #[test]
    fn message_ids_are_unique() {
        let term = TerminalChannel::quiet("me");
        assert_ne!(term.inbound("a").message_id, term.inbound("a").message_id);
    }
}
