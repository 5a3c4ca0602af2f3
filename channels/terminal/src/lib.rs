//! chela-terminal: the terminal channel. Each line read from stdin is one message from the
//! local user; replies stream to stdout as they are generated (an edit prints only the new
//! text), and a finished reply ends its line.

pub mod editor;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, Inbound, InboundSink, Limits, Sender,
    SentMessage,
};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The channel name in session keys and conversations.
pub const NAME: &str = "terminal";

/// What has been printed of the reply being streamed.
#[derive(Default)]
struct Screen {
    current: Option<String>,
    printed: String,
    open_line: bool,
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
    out: Mutex<(Box<dyn AsyncWrite + Send + Unpin>, Screen)>,
    next_id: AtomicU64,
    quiet: bool,
    input: std::sync::Mutex<Option<Input>>,
    /// Lines handed on in order before the input (`chat --new`, `--model`).
    preface: std::sync::Mutex<Vec<String>>,
    /// When quiet: each message sent, by id, with its latest text (see [`TerminalChannel::said`]).
    said: std::sync::Mutex<Vec<(String, String)>>,
}

/// Most messages a quiet terminal keeps for [`TerminalChannel::said`].
const SAID_MAX: usize = 64;

impl TerminalChannel {
    /// A terminal channel for `user`, printing to stdout.
    pub fn new(user: impl Into<String>) -> Arc<Self> {
        Self::with_output(user, Box::new(tokio::io::stdout()), false)
    }

    /// A terminal channel that prints nothing (for `chela agent --json`).
    pub fn quiet(user: impl Into<String>) -> Arc<Self> {
        Self::with_output(user, Box::new(tokio::io::sink()), true)
    }

    /// A terminal channel writing to `out` (tests).
    pub fn with_output(
        user: impl Into<String>,
        out: Box<dyn AsyncWrite + Send + Unpin>,
        quiet: bool,
    ) -> Arc<Self> {
        Arc::new(TerminalChannel {
            user: user.into(),
            out: Mutex::new((out, Screen::default())),
            next_id: AtomicU64::new(1),
            quiet,
            input: std::sync::Mutex::new(Some(Input::Stdin)),
            preface: std::sync::Mutex::new(Vec::new()),
            said: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The text of each message a quiet terminal was asked to show, oldest first, as last
    /// edited (at most the last 64): `chela agent --json` prints a command's answer, which
    /// comes without a run. Empty when not quiet.
    pub fn said(&self) -> Vec<String> {
        let said = self
            .said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        said.iter().map(|(_, text)| text.clone()).collect()
    }

    /// Keeps `text` as the latest of message `id` when quiet.
    fn keep(&self, id: &str, text: &str) {
        if !self.quiet {
            return;
        }
        let mut said = self
            .said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    /// Prints `line` on a line of its own between the reply's text (a tool's progress).
    pub async fn note(&self, line: &str) -> Result<(), ChannelError> {
        self.write(|screen| {
            let lead = if screen.open_line { "\n" } else { "" };
            // The reply goes on below the note, on a new line.
            screen.open_line = false;
            screen.current = None;
            format!("{lead}{line}\n")
        })
        .await
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
            let _ = self
                .write(|_| format!("[chela] message not accepted: {e}\n"))
                .await;
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

    async fn write(&self, f: impl FnOnce(&mut Screen) -> String) -> Result<(), ChannelError> {
        let mut guard = self.out.lock().await;
        let (out, screen) = &mut *guard;
        let text = f(screen);
        if self.quiet || text.is_empty() {
            return Ok(());
        }
        out.write_all(text.as_bytes())
            .await
            .map_err(|e| ChannelError::Transport(e.to_string()))?;
        out.flush()
            .await
            .map_err(|e| ChannelError::Transport(e.to_string()))
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
            self.write(move |screen| {
                let lead = if screen.open_line { "\n" } else { "" };
                screen.current = Some(new_id);
                screen.printed = text.to_string();
                screen.open_line = true;
                format!("{lead}{text}")
            })
            .await?;
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
            self.write(|screen| {
                let same = screen.current.as_deref() == Some(message.message_id.as_str());
                let out = if same && text.starts_with(&screen.printed) {
                    text[screen.printed.len()..].to_string()
                } else {
                    // A terminal cannot rewrite what scrolled by: show the new text whole.
                    format!("\n{text}")
                };
                screen.current = Some(message.message_id.clone());
                screen.printed = text.to_string();
                screen.open_line = true;
                out
            })
            .await
        })
    }

    fn reply_done<'a>(&'a self, _to: &'a Conversation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self
                .write(|screen| {
                    let end = if screen.open_line { "\n" } else { "" };
                    *screen = Screen::default();
                    end.to_string()
                })
                .await;
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
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn edits_print_only_new_text_and_done_ends_the_line() {
        let (writer, mut reader) = tokio::io::duplex(1024);
        let term = TerminalChannel::with_output("me", Box::new(writer), false);
        let to = term.conversation();
        let sent = term.send(&to, "Hel").await.unwrap();
        term.edit(&to, &sent, "Hello").await.unwrap();
        term.edit(&to, &sent, "Hello, world").await.unwrap();
        term.reply_done(&to).await;
        drop(term);
        let mut out = String::new();
        reader.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "Hello, world\n");
    }

    #[tokio::test]
    async fn a_quiet_terminal_keeps_what_it_was_asked_to_show() {
        let term = TerminalChannel::quiet("me");
        let to = term.conversation();
        let first = term.send(&to, "Hel").await.unwrap();
        term.edit(&to, &first, "Hello").await.unwrap();
        term.send(&to, "again").await.unwrap();
        assert_eq!(term.said(), ["Hello", "again"]);
        let loud = TerminalChannel::with_output("me", Box::new(tokio::io::sink()), false);
        loud.send(&to, "x").await.unwrap();
        assert!(loud.said().is_empty());
    }

    #[test]
    fn message_ids_are_unique() {
        let term = TerminalChannel::quiet("me");
        assert_ne!(term.inbound("a").message_id, term.inbound("a").message_id);
    }
}
