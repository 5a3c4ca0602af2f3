//! `chela chat` and `chela gateway`: the terminal channel on a live gateway.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chela::agent::run::RunStatus;
use chela::config::LoadedConfig;
use chela::domain::events::{RunEvent, ToolEvent};
use chela::domain::run::LiveEvent;
use chela_terminal::{Input, TerminalChannel};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// A second Ctrl-C within this window exits even while a run is stopping.
const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);

/// The options of `chela chat`.
#[derive(Debug, Default, clap::Args)]
pub struct ChatOptions {
    /// Start a new conversation window first (as `/new`).
    #[arg(long)]
    pub new: bool,
    /// Use this model in the conversation (as `/model NAME`).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
}

impl ChatOptions {
    /// The commands the options stand for, handed on before the first typed line.
    fn preface(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.new {
            lines.push("/new".to_owned());
        }
        if let Some(model) = &self.model {
            lines.push(format!("/model {model}"));
        }
        lines
    }
}

/// `chela chat`: Ctrl-C stops the current run; Ctrl-C when idle, a second Ctrl-C, or Ctrl-D
/// (after the last reply) exits. Lines piped in are handled in input order, and the exit
/// status is 1 when a turn failed.
pub async fn chat(loaded: LoadedConfig, options: ChatOptions) -> ExitCode {
    let terminal = TerminalChannel::new(super::terminal_user(&loaded));
    let interactive = std::io::stdin().is_terminal();
    let input = if interactive {
        Input::Stdin
    } else {
        Input::StdinInOrder
    };
    terminal.set_input(input, options.preface());
    let gateway = match super::start(&loaded, vec![terminal.clone()]).await {
        Ok(g) => g,
        Err(code) => return code,
    };
    if let Err(code) = super::serve_rpc(&gateway).await {
        return code;
    }
    let key = gateway.core().session_key(&terminal.inbound(""));
    let mut runs = Runs {
        key: key.clone(),
        events: gateway.subscribe_events(),
        terminal: terminal.clone(),
        progress: interactive
            && std::io::stdout().is_terminal()
            && loaded.config.terminal.tool_progress,
        failed: 0,
        open: true,
    };
    let lanes = gateway.core().lanes.clone();
    let stop = CancellationToken::new();
    let channels = gateway.run_channels(stop.clone());
    tokio::pin!(channels);
    let mut last_ctrl_c: Option<tokio::time::Instant> = None;
    let mut input_done = false;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                let now = tokio::time::Instant::now();
                let running = lanes.status(&key).await.map(|s| s.running || s.queued > 0).unwrap_or(false);
                if !running || last_ctrl_c.is_some_and(|t| now - t < DOUBLE_CTRL_C) {
                    break;
                }
                last_ctrl_c = Some(now);
                eprintln!("\n[stopping; Ctrl-C again to exit]");
                let lanes = lanes.clone();
                let key = key.clone();
                tokio::spawn(async move { let _ = lanes.stop(&key).await; });
            }
            event = runs.events.recv(), if runs.open => runs.see(event).await,
            // Ctrl-D: answer what was typed, then exit.
            _ = &mut channels, if !input_done => input_done = true,
            // ... and what its sub-agents report back.
            _ = chela::gateway::subagent::wait_settled(gateway.core(), &key), if input_done => break,
        }
    }
    stop.cancel();
    gateway.shutdown().await;
    runs.drain().await;
    if !interactive && runs.failed > 0 {
        eprintln!(
            "chela: {} turn(s) failed (the log: {})",
            runs.failed,
            super::log_file(&loaded).display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The chat's view of the run bus: failed turns, and tool progress lines.
struct Runs {
    key: String,
    events: tokio::sync::broadcast::Receiver<LiveEvent>,
    terminal: Arc<TerminalChannel>,
    /// Show a line per tool call of chela's agent.
    progress: bool,
    /// Runs of the chat's session that ended in an error.
    failed: usize,
    /// False once the bus has closed.
    open: bool,
}

impl Runs {
    async fn see(&mut self, event: Result<LiveEvent, RecvError>) {
        let event = match event {
            Ok(event) if event.session_key == self.key => event.event,
            Ok(_) => return,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "the chat missed run events");
                return;
            }
            Err(RecvError::Closed) => {
                self.open = false;
                return;
            }
        };
        match event {
            RunEvent::Finished(record) if matches!(record.status, RunStatus::Error(_)) => {
                self.failed += 1;
            }
            RunEvent::Tool(tool) if self.progress => {
                if let Some(line) = progress_line(&tool) {
                    let _ = self.terminal.note(&line).await;
                }
            }
            _ => {}
        }
    }

    /// Takes in what the bus still holds.
    async fn drain(&mut self) {
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

/// The progress line of a tool event: its start, and a failed end.
fn progress_line(event: &ToolEvent) -> Option<String> {
    match event {
        ToolEvent::Start { name, .. } => Some(format!("🔧 {name}")),
        ToolEvent::End {
            name,
            is_error: true,
            ..
        } => Some(format!("⚠️ {name} failed")),
        ToolEvent::End { .. } => None,
    }
}

/// `chela gateway`: runs every configured channel until Ctrl-C or SIGTERM; a second signal
/// exits at once.
pub async fn gateway(loaded: LoadedConfig) -> ExitCode {
    let started = std::time::Instant::now();
    let mut signals = Signals::new();
    let mut channels = match super::platform_channels(&loaded) {
        Ok(channels) => channels,
        Err(code) => return code,
    };
    if channels.is_empty() {
        // No platform token set: the terminal is the channel.
        channels
            .push(TerminalChannel::new(super::terminal_user(&loaded))
                as Arc<dyn chela_channel::Channel>);
    }
    let names: Vec<String> = channels.iter().map(|c| c.name().to_string()).collect();
    let gateway = match super::start(&loaded, channels).await {
        Ok(g) => g,
        Err(code) => return code,
    };
    if let Err(code) = super::serve_rpc(&gateway).await {
        return code;
    }
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        channels = %names.join(","),
        "chela ready"
    );
    let stop = CancellationToken::new();
    let run = gateway.run_channels(stop.clone());
    tokio::pin!(run);
    let mut channels_done = false;
    loop {
        tokio::select! {
            _ = signals.next() => break,
            _ = &mut run, if !channels_done => channels_done = true,
        }
    }
    let grace = std::time::Duration::from_secs(loaded.config.agent.shutdown_grace_s);
    tracing::info!(
        grace_s = grace.as_secs(),
        "shutting down; runs going on may finish"
    );
    stop.cancel();
    tokio::select! {
        _ = gateway.shutdown_after(grace) => {}
        _ = signals.next() => eprintln!("chela: second signal, exiting now"),
    }
    ExitCode::SUCCESS
}

/// SIGTERM and SIGINT, listened to from the start of `chela gateway` to its end, so a
/// signal that arrives between two waits is not missed.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Waits for the next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = recv(&mut self.term) => {}
                _ = recv(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_commands_before_the_first_line() {
        let options = ChatOptions {
            new: true,
            model: Some("small".into()),
        };
        assert_eq!(options.preface(), ["/new", "/model small"]);
        assert!(ChatOptions::default().preface().is_empty());
    }

    #[test]
    fn a_tool_shows_its_start_and_a_failure() {
        let start = ToolEvent::Start {
            id: "1".into(),
            name: "exec".into(),
        };
        assert_eq!(progress_line(&start).as_deref(), Some("🔧 exec"));
        let end = |is_error| ToolEvent::End {
            id: "1".into(),
            name: "exec".into(),
            is_error,
        };
        assert_eq!(progress_line(&end(false)), None);
        assert_eq!(progress_line(&end(true)).as_deref(), Some("⚠️ exec failed"));
    }
}
