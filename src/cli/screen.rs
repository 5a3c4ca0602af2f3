//! What a person at a terminal sees of a chat (`chela chat`, the terminal of `chela gateway`,
//! a chat through a gateway's RPC): the terminal channel with a line editor and a live view
//! on a terminal, plain text otherwise; and the runs' events shown on it: a spinner while the
//! model thinks or a tool runs, a line per tool call with an excerpt of the call, failures in
//! red, and the tokens of each turn when asked (`/usage`).

use std::io::IsTerminal;
use std::sync::Arc;

use chela::agent::pricing::thousands;
use chela::agent::run::RunStatus;
use chela::config::LoadedConfig;
use chela::domain::events::{Lifecycle, LiveEvent, RunEvent, ToolEvent};
use chela::domain::run::RunRecord;
use chela_terminal::editor::{self, Typed};
use chela_terminal::style::Paint;
use chela_terminal::{Note, TerminalChannel};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::Receiver;

/// The prompt of the line editor.
const PROMPT: &str = "> ";

/// The terminal channel of a chat, what is typed at its line editor (none when stdin is not
/// a terminal, or the editor could not start), and the terminal's settings to put back at
/// the end (keep them until then).
pub(super) fn open(
    loaded: &LoadedConfig,
    user: String,
) -> (
    Arc<TerminalChannel>,
    Option<Receiver<Typed>>,
    Option<TerminalModes>,
) {
    let modes = std::io::stdin().is_terminal().then(TerminalModes::save);
    let (terminal, typed) = open_channel(loaded, user);
    (terminal, typed, modes)
}

/// The channel and the editor of [`open`].
fn open_channel(
    loaded: &LoadedConfig,
    user: String,
) -> (Arc<TerminalChannel>, Option<Receiver<Typed>>) {
    let out_is_terminal = std::io::stdout().is_terminal();
    let paint = Paint::for_terminal(out_is_terminal);
    let on_stdout = || match out_is_terminal {
        true => TerminalChannel::live(user.clone(), Box::new(std::io::stdout()), paint),
        false => TerminalChannel::new(user.clone()),
    };
    if !std::io::stdin().is_terminal() {
        return (on_stdout(), None);
    }
    let (editor, out) = match editor::open(PROMPT.to_owned(), history_file(loaded), paint) {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("chela: {e}; reading plain lines");
            return (on_stdout(), None);
        }
    };
    let terminal = match out_is_terminal {
        true => TerminalChannel::live(user.clone(), out, paint),
        false => TerminalChannel::with_output(user.clone(), out, false),
    };
    let shown = Arc::downgrade(&terminal);
    let on_enter: editor::OnEnter = Arc::new(move |rows, echo| {
        if let Some(terminal) = shown.upgrade() {
            terminal.entered(rows, echo);
        }
    });
    match editor.read(on_enter) {
        Ok(typed) => (terminal, Some(typed)),
        Err(e) => {
            eprintln!("chela: {e}; reading plain lines");
            (on_stdout(), None)
        }
    }
}

/// The chat's history of typed lines: `<store.path>.history`, beside the store.
fn history_file(loaded: &LoadedConfig) -> std::path::PathBuf {
    let mut name = loaded.config.store.path.clone().into_os_string();
    name.push(".history");
    name.into()
}

/// The terminal's settings at the start of a chat, put back when it ends (it may end while
/// the editor is reading in raw mode).
pub(super) struct TerminalModes(Option<nix::sys::termios::Termios>);

impl TerminalModes {
    fn save() -> Self {
        TerminalModes(nix::sys::termios::tcgetattr(std::io::stdin()).ok())
    }
}

impl Drop for TerminalModes {
    fn drop(&mut self) {
        if let Some(modes) = &self.0 {
            let now = nix::sys::termios::SetArg::TCSANOW;
            if let Err(e) = nix::sys::termios::tcsetattr(std::io::stdin(), now, modes) {
                tracing::warn!(error = %e, "cannot restore the terminal's settings");
            }
            // The editor turns bracketed paste on for each read: off again.
            use std::io::Write;
            let mut out = std::io::stdout();
            if let Err(e) = out.write_all(b"\x1b[?2004l").and_then(|()| out.flush()) {
                tracing::debug!(error = %e, "cannot end bracketed paste");
            }
        }
    }
}

/// Says `said` on the terminal as `kind` when it shows a person what happens, else on stderr
/// (stdout holds the replies alone).
pub(super) fn tell(terminal: &TerminalChannel, kind: Note, said: &str) {
    match terminal.is_live() {
        true => {
            let _ = terminal.note_as(kind, said);
        }
        false => eprintln!("{said}"),
    }
}

/// What `line`, typed at the chat, asks of the screen itself: `/usage on` or `/usage off`
/// sets whether each turn's tokens show. `None`: the line is a message (`/usage` alone is
/// the gateway's command: the session's tokens and cost).
pub(super) fn usage_switch(line: &str) -> Option<bool> {
    let mut words = line.split_whitespace();
    if words.next() != Some("/usage") {
        return None;
    }
    match (words.next(), words.next()) {
        (Some("on"), None) => Some(true),
        (Some("off"), None) => Some(false),
        _ => None,
    }
}

/// The chat's view of the run bus: what the terminal shows of its runs, and failed turns.
pub(super) struct Runs {
    /// The session shown.
    pub key: String,
    /// The run bus.
    pub events: tokio::sync::broadcast::Receiver<LiveEvent>,
    /// What is shown of it.
    pub shows: Shows,
    /// Runs of the chat's session that ended in an error.
    pub failed: usize,
    /// Whether run events were missed (the bus lagged), so a failure may have gone unseen.
    pub missed: bool,
    /// False once the bus has closed.
    pub open: bool,
}

impl Runs {
    /// Takes in one event of the bus.
    pub async fn see(&mut self, event: Result<LiveEvent, RecvError>) {
        let event = match event {
            Ok(event) if event.session_key == self.key => event.event,
            Ok(_) => return,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "the chat missed run events");
                // The end of a run may be among them: nothing is left turning.
                self.shows.terminal.unspin();
                // A missed end may have been a failure: a pipe must not report success then.
                self.missed = true;
                return;
            }
            Err(RecvError::Closed) => {
                self.open = false;
                return;
            }
        };
        if let RunEvent::Finished(record) = &event
            && Shows::failed(record)
        {
            self.failed += 1;
        }
        self.shows.show(&event);
    }

    /// Takes in what the bus still holds.
    pub async fn drain(&mut self) {
        while self.open {
            match self.events.try_recv() {
                Ok(event) => self.see(Ok(event)).await,
                Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => {
                    self.see(Err(RecvError::Lagged(n))).await;
                }
                Err(_) => break,
            }
        }
    }
}

/// Shows the events of a chat's runs on its terminal.
pub(super) struct Shows {
    /// The terminal.
    pub terminal: Arc<TerminalChannel>,
    /// A line per tool call of chela's agent.
    pub progress: bool,
    /// The tokens of each turn.
    pub usage: bool,
    /// The model's context window (0: unknown).
    pub context_window: u64,
    /// The reply's text comes as events (through the RPC), not as the channel's messages.
    pub text_from_events: bool,
}

impl Shows {
    /// The shows of `loaded`'s terminal settings on `terminal`.
    pub fn new(
        loaded: &LoadedConfig,
        terminal: Arc<TerminalChannel>,
        text_from_events: bool,
    ) -> Shows {
        let terminal_config = &loaded.config.terminal;
        Shows {
            progress: terminal_config.tool_progress && terminal.is_live(),
            usage: terminal_config.usage && terminal.is_live(),
            context_window: loaded.config.model.context_window,
            terminal,
            text_from_events,
        }
    }

    /// Shows one event of a run of the chat's session.
    pub fn show(&self, event: &RunEvent) {
        let terminal = &self.terminal;
        match event {
            RunEvent::Lifecycle(Lifecycle::Start) => terminal.spin("thinking"),
            RunEvent::Assistant { delta } => {
                terminal.unspin();
                if self.text_from_events {
                    terminal.stream(delta);
                }
            }
            RunEvent::Tool(tool) => {
                if let Some((kind, line)) = self.progress.then(|| progress_line(tool)).flatten() {
                    let _ = terminal.note_as(kind, &line);
                }
                match tool {
                    ToolEvent::Start { name, .. } => terminal.spin(name),
                    ToolEvent::End { .. } => terminal.spin("thinking"),
                }
            }
            RunEvent::Finished(record) => {
                terminal.unspin();
                if self.text_from_events {
                    terminal.end_stream();
                }
                if self.usage {
                    terminal.note_after_reply(Note::Info, &usage_line(record, self.context_window));
                }
            }
            RunEvent::Lifecycle(_)
            | RunEvent::Compaction(_)
            | RunEvent::Sent { .. }
            | RunEvent::Reasoning { .. } => {}
        }
    }

    /// Takes `/usage` typed at the chat (see [`usage_switch`]) and says what it did; false
    /// when `line` is a message.
    pub fn usage_command(&mut self, line: &str) -> bool {
        // Off a terminal the reply's text is all that is printed: the line is a message.
        if !self.terminal.is_live() {
            return false;
        }
        let Some(on) = usage_switch(line) else {
            return false;
        };
        self.usage = on;
        let said = match on {
            true => {
                "usage: each turn's tokens are shown (/usage off hides them; /usage alone sums up the session)"
            }
            false => "usage: hidden (/usage on shows each turn's tokens)",
        };
        let _ = self.terminal.note_as(Note::Info, said);
        true
    }

    /// Whether `record` ended in an error.
    pub fn failed(record: &RunRecord) -> bool {
        matches!(record.status, RunStatus::Error(_))
    }
}

/// The progress line of a tool event: its start with an excerpt of the call, and a failed
/// end.
pub(super) fn progress_line(event: &ToolEvent) -> Option<(Note, String)> {
    match event {
        ToolEvent::Start { name, summary, .. } if summary.is_empty() => {
            Some((Note::Tool, format!("🔧 {name}")))
        }
        ToolEvent::Start { name, summary, .. } => {
            Some((Note::Tool, format!("🔧 {name}  {summary}")))
        }
        ToolEvent::End {
            name,
            is_error: true,
            ..
        } => Some((Note::Error, format!("⚠️ {name} failed"))),
        ToolEvent::End { .. } => None,
    }
}

/// The usage line of a run: `↑ 1,200 in (800 cached) · ↓ 56 out · context 1,290 of 128,000
/// (1%) · $0.0012` (the cost when every model's price is known).
pub(super) fn usage_line(record: &RunRecord, context_window: u64) -> String {
    let usage = &record.usage;
    if usage.input + usage.output + usage.cache_read + usage.cache_write == 0 {
        return "usage: the model did not say how many tokens it used".to_owned();
    }
    let prompt = usage.input + usage.cache_read + usage.cache_write;
    let mut line = format!("↑ {} in", thousands(prompt));
    if usage.cache_read > 0 {
        line.push_str(&format!(" ({} cached)", thousands(usage.cache_read)));
    }
    line.push_str(&format!(" · ↓ {} out", thousands(usage.output)));
    if record.context_tokens > 0 {
        line.push_str(&format!(" · context {}", thousands(record.context_tokens)));
        if let Some(percent) = record
            .context_tokens
            .saturating_mul(100)
            .checked_div(context_window)
        {
            line.push_str(&format!(" of {} ({percent}%)", thousands(context_window)));
        }
    }
    if let Some(cost) = record.cost_usd {
        line.push_str(&format!(" · {}", chela::agent::pricing::dollars(cost)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use chela::domain::message::Usage;

    #[test]
    fn a_tool_shows_its_start_with_an_excerpt_and_a_failure() {
        let start = |summary: &str| ToolEvent::Start {
            id: "1".into(),
            name: "exec".into(),
            summary: summary.into(),
        };
        assert_eq!(
            progress_line(&start("ls -la src")),
            Some((Note::Tool, "🔧 exec  ls -la src".to_owned()))
        );
        assert_eq!(
            progress_line(&start("")),
            Some((Note::Tool, "🔧 exec".to_owned()))
        );
        let end = |is_error| ToolEvent::End {
            id: "1".into(),
            name: "exec".into(),
            is_error,
        };
        assert_eq!(progress_line(&end(false)), None);
        assert_eq!(
            progress_line(&end(true)),
            Some((Note::Error, "⚠️ exec failed".to_owned()))
        );
    }

    #[test]
    fn usage_says_tokens_in_out_cached_and_the_context_fill() {
        let mut record = RunRecord {
            run_id: "run-1".into(),
            seqs: vec![1],
            session_key: "k".into(),
            status: RunStatus::Ok,
            text: String::new(),
            started_ms: 1,
            ended_ms: 2,
            usage: Usage::default(),
            context_tokens: 0,
            cost_usd: None,
        };
        assert!(usage_line(&record, 0).contains("did not say"));
        record.usage = Usage {
            input: 400,
            output: 56,
            cache_read: 1_200,
            cache_write: 0,
            total_tokens: 1_656,
        };
        record.context_tokens = 1_290;
        assert_eq!(
            usage_line(&record, 128_000),
            "↑ 1,600 in (1,200 cached) · ↓ 56 out · context 1,290 of 128,000 (1%)"
        );
        record.cost_usd = Some(0.00042);
        assert!(usage_line(&record, 0).ends_with(" · $0.0004"));
    }

    #[test]
    fn usage_is_switched_by_its_command_only() {
        assert_eq!(usage_switch("/usage on"), Some(true));
        assert_eq!(usage_switch(" /usage off "), Some(false));
        // Alone, it asks the gateway for the session's usage.
        assert_eq!(usage_switch("/usage"), None);
        assert_eq!(usage_switch("/usage please"), None);
        assert_eq!(usage_switch("/usages on"), None);
        assert_eq!(usage_switch("hello"), None);
    }
}
