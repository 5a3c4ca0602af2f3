//! `chela chat` and `chela gateway`: the terminal channel on a live gateway.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chela::config::LoadedConfig;
use chela::domain::session_key::SessionKey;
use chela_terminal::editor::Typed;
use chela_terminal::{Input, Note, TerminalChannel};
use tokio_util::sync::CancellationToken;

use super::screen::{self, Runs, Shows};

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
    /// Talk in session KEY (e.g. one `chela sessions list` shows) instead of the terminal's own.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
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
    if loaded.config.cluster.enabled {
        // It would join the cluster as a node of its own and take sessions from the others.
        eprintln!(
            "chela: chat does not run on a cluster config ([cluster] enabled): talk to the \
             running nodes with `chela agent --message TEXT` (through a node's RPC), or use a \
             config without [cluster] and its own store"
        );
        return ExitCode::from(2);
    }
    let session = match options.session.as_deref().map(SessionKey::parse) {
        None => None,
        Some(Ok(key)) => Some(key.to_string()),
        Some(Err(e)) => {
            eprintln!("chela: --session: {e}");
            return ExitCode::from(2);
        }
    };
    // A gateway (or another chat) holds the store: chat through its RPC.
    if let Ok(client) = super::rpc::connect(&loaded).await {
        client.close().await;
        return super::chat_rpc::chat(&loaded, options.preface(), session).await;
    }
    let user = super::terminal_user(&loaded);
    let interactive = std::io::stdin().is_terminal();
    let (terminal, mut typed, _modes) = screen::open(&loaded, user);
    // Lines from the editor go through here, so Ctrl-C and Ctrl-D at the prompt reach the loop.
    let mut lines = None;
    let input = match (&typed, interactive) {
        (Some(_), _) => {
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            lines = Some(tx);
            Input::Lines(rx)
        }
        (None, true) => Input::Stdin,
        (None, false) => Input::StdinInOrder,
    };
    terminal.set_input(input, options.preface());
    let gateway = match super::start(&loaded, vec![terminal.clone()]).await {
        Ok(g) => g,
        Err(code) => return code,
    };
    if let Err(code) = super::serve_rpc(&gateway).await {
        return code;
    }
    let key = match &session {
        Some(key) => key.clone(),
        None => gateway.session_key(&terminal.inbound("")),
    };
    if interactive {
        let _ = terminal.note(&banner(&gateway, &key, &options)).await;
    }
    let mut runs = Runs {
        key: key.clone(),
        events: gateway.subscribe_events(),
        shows: Shows::new(&loaded, terminal.clone(), false),
        failed: 0,
        missed: false,
        open: true,
    };
    let mut ctrl_c = CtrlC {
        lanes: gateway.lanes().clone(),
        key: key.clone(),
        last: None,
        terminal: terminal.clone(),
    };
    let stop = CancellationToken::new();
    let router = match session {
        Some(key) => gateway.router_for_session(key),
        None => gateway.router(),
    };
    let channels = gateway.run_channels_through(router, stop.clone());
    tokio::pin!(channels);
    let mut input_done = false;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => if ctrl_c.exits().await { break },
            line = next_typed(&mut typed) => match line {
                Typed::Line(line) => if !runs.shows.usage_command(&line)
                    && let Some(tx) = &lines
                {
                    let _ = tx.send(line).await;
                },
                Typed::Interrupt => if ctrl_c.exits().await { break },
                // Ctrl-D: the input ends once the lines before it are in.
                Typed::End => {
                    typed = None;
                    lines = None;
                }
            },
            event = runs.events.recv(), if runs.open => runs.see(event).await,
            // Ctrl-D: answer what was typed, then exit.
            _ = &mut channels, if !input_done => input_done = true,
            // ... and what its sub-agents report back.
            _ = gateway.wait_settled(&key), if input_done => break,
        }
    }
    stop.cancel();
    gateway.shutdown().await;
    runs.drain().await;
    terminal.settle();
    if !interactive && runs.failed > 0 {
        eprintln!(
            "chela: {} turn(s) failed (the log: {})",
            runs.failed,
            super::log_file(&loaded).display()
        );
        return ExitCode::FAILURE;
    }
    if !interactive && runs.missed {
        eprintln!(
            "chela: the chat fell behind the run events and cannot tell whether every turn succeeded (the log: {})",
            super::log_file(&loaded).display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The next thing typed at the editor (never, without one).
async fn next_typed(typed: &mut Option<tokio::sync::mpsc::Receiver<Typed>>) -> Typed {
    match typed {
        Some(rx) => rx.recv().await.unwrap_or(Typed::End),
        None => std::future::pending().await,
    }
}

/// The line shown when an interactive chat starts: model, session, how to leave.
fn banner(gateway: &chela::gateway::Gateway, key: &str, options: &ChatOptions) -> String {
    format!(
        "chela chat · {} · session {key} · Ctrl-C stops a reply, Ctrl-D leaves · a line ending in \\ goes on",
        model_of(gateway, key, options.model.clone())
    )
}

/// `provider/model` of session `key`: `asked` (`--model`), else the one chosen in the
/// conversation, else the agent's.
pub(super) fn model_of(
    gateway: &chela::gateway::Gateway,
    key: &str,
    asked: Option<String>,
) -> String {
    let provider = &gateway.agents().for_key(key).provider;
    let chosen = chela::agent::model_choice::chosen(gateway.store(), key);
    let model = asked.or(chosen);
    format!(
        "{}/{}",
        provider.name(),
        model.as_deref().unwrap_or(provider.model())
    )
}

/// Ctrl-C: stops the current run; when idle, or a second time soon after, exits.
struct CtrlC {
    lanes: chela::lane::Lanes,
    key: String,
    last: Option<tokio::time::Instant>,
    terminal: Arc<TerminalChannel>,
}

impl CtrlC {
    /// Handles one Ctrl-C; true when the chat should exit.
    async fn exits(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let running = self
            .lanes
            .status(&self.key)
            .await
            .map(|s| s.running || s.queued > 0)
            .unwrap_or(false);
        if !running || self.last.is_some_and(|t| now - t < DOUBLE_CTRL_C) {
            return true;
        }
        self.last = Some(now);
        screen::tell(
            &self.terminal,
            Note::Error,
            "[stopping; Ctrl-C again to exit]",
        );
        let (lanes, key) = (self.lanes.clone(), self.key.clone());
        tokio::spawn(async move {
            let _ = lanes.stop(&key).await;
        });
        false
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
            session: None,
        };
        assert_eq!(options.preface(), ["/new", "/model small"]);
        assert!(ChatOptions::default().preface().is_empty());
    }
}
