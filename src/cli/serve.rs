//! `chela gateway`: every configured channel until a signal; with no platform token, the
//! terminal is the channel (typed at by a person: the chat's banner, prompt and exit keys).

use std::process::ExitCode;
use std::sync::Arc;

use chela::config::LoadedConfig;
use chela_terminal::editor::Typed;
use chela_terminal::{Input, Note, TerminalChannel};
use tokio_util::sync::CancellationToken;

use super::screen::{self, Runs, Shows};

/// `chela gateway`: runs every configured channel until Ctrl-C or SIGTERM; a second signal
/// exits at once.
pub async fn gateway(loaded: LoadedConfig) -> ExitCode {
    let started = std::time::Instant::now();
    let mut signals = Signals::new();
    let mut channels = match super::platform_channels(&loaded) {
        Ok(channels) => channels,
        Err(code) => return code,
    };
    // No platform token set: the terminal is the channel; typed at by a person, it is the
    // chat's (banner, prompt, spinner), and Ctrl-D or Ctrl-C stops the gateway.
    let typed_at = channels.is_empty() && super::terminal_gateway(&loaded);
    let Terminal {
        channel: terminal,
        typed,
        lines,
        modes: _modes,
    } = Terminal::open(&loaded, channels.is_empty(), typed_at);
    if let Some(terminal) = &terminal {
        channels.push(terminal.clone() as Arc<dyn chela_channel::Channel>);
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
    let mut person = terminal
        .filter(|_| typed_at)
        .map(|terminal| Person::greet(&loaded, &gateway, terminal, typed, lines));
    let stop = CancellationToken::new();
    let run = gateway.run_channels(stop.clone());
    tokio::pin!(run);
    let mut channels_done = false;
    let damaged = loop {
        tokio::select! {
            _ = signals.next() => break None,
            // Ctrl-D or Ctrl-C at the terminal that is the channel: the gateway stops.
            ended = async { match person.as_mut() {
                Some(person) => person.next().await,
                None => std::future::pending().await,
            } } => if ended { break None },
            _ = &mut run, if !channels_done => {
                channels_done = true;
                if typed_at {
                    break None;
                }
            }
            damage = gateway.store_damaged() => break Some(damage),
        }
    };
    if let Some(damage) = damaged {
        // Nothing more can be kept or answered: stop at once, and say what to do.
        tracing::error!(error = %damage, "the store cannot go on; stopping");
        stop.cancel();
        gateway.shutdown().await;
        eprintln!("chela: {damage}");
        return ExitCode::from(2);
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
        // At the terminal's prompt a Ctrl-C is a key, not a signal.
        _ = Person::interrupted(person.as_mut()) => eprintln!("chela: second Ctrl-C, exiting now"),
    }
    if let Some(person) = &person {
        person.runs.shows.terminal.settle();
    }
    ExitCode::SUCCESS
}

/// The terminal as the gateway's channel, when no platform token is set.
struct Terminal {
    channel: Option<Arc<TerminalChannel>>,
    /// What is typed at its line editor (a person at a terminal).
    typed: Option<tokio::sync::mpsc::Receiver<Typed>>,
    /// Where the typed lines go on to the channel.
    lines: Option<tokio::sync::mpsc::Sender<String>>,
    /// The terminal's settings, put back when dropped.
    modes: Option<screen::TerminalModes>,
}

impl Terminal {
    /// The terminal channel when `wanted`; with the chat's screen and editor when
    /// `typed_at` by a person.
    fn open(loaded: &LoadedConfig, wanted: bool, typed_at: bool) -> Terminal {
        let user = super::terminal_user(loaded);
        let (channel, typed, modes) = match (wanted, typed_at) {
            (false, _) => (None, None, None),
            (true, true) => {
                let (channel, typed, modes) = screen::open(loaded, user);
                (Some(channel), typed, modes)
            }
            (true, false) => (Some(TerminalChannel::new(user)), None, None),
        };
        let mut lines = None;
        if let (Some(channel), Some(_)) = (&channel, &typed) {
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            lines = Some(tx);
            channel.set_input(Input::Lines(rx), Vec::new());
        }
        Terminal {
            channel,
            typed,
            lines,
            modes,
        }
    }
}

/// The person at the terminal that is the gateway's channel: what they type, and what the
/// terminal shows of their session's runs.
struct Person {
    typed: Option<tokio::sync::mpsc::Receiver<Typed>>,
    lines: Option<tokio::sync::mpsc::Sender<String>>,
    runs: Runs,
}

impl Person {
    /// Shows the banner, and starts watching the session's runs.
    fn greet(
        loaded: &LoadedConfig,
        gateway: &chela::gateway::Gateway,
        terminal: Arc<TerminalChannel>,
        typed: Option<tokio::sync::mpsc::Receiver<Typed>>,
        lines: Option<tokio::sync::mpsc::Sender<String>>,
    ) -> Person {
        let key = gateway.session_key(&terminal.inbound(""));
        let banner = format!(
            "chela gateway · {} · session {key} · no platform token: the terminal is the \
             channel · Ctrl-D or Ctrl-C stops the gateway",
            super::chat::model_of(gateway, &key, None)
        );
        let _ = terminal.note_as(Note::Info, &banner);
        let runs = Runs {
            key,
            events: gateway.subscribe_events(),
            shows: Shows::new(loaded, terminal, false),
            failed: 0,
            missed: false,
            open: true,
        };
        Person { typed, lines, runs }
    }

    /// Waits for a Ctrl-C at the prompt (what else is typed is let go); never without a
    /// person.
    async fn interrupted(person: Option<&mut Person>) {
        let Some(typed) = person.and_then(|person| person.typed.as_mut()) else {
            return std::future::pending().await;
        };
        loop {
            match typed.recv().await {
                Some(Typed::Interrupt) => return,
                Some(_) => {}
                None => return std::future::pending().await,
            }
        }
    }

    /// Handles what comes next: a typed line, a run's event; true when the person ends the
    /// gateway (Ctrl-D, Ctrl-C at the prompt).
    async fn next(&mut self) -> bool {
        let typed = async {
            match self.typed.as_mut() {
                Some(rx) => rx.recv().await.unwrap_or(Typed::End),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            typed = typed => match typed {
                Typed::Line(line) => {
                    if !self.runs.shows.usage_command(&line)
                        && let Some(tx) = &self.lines
                    {
                        let _ = tx.send(line).await;
                    }
                    false
                }
                Typed::Interrupt | Typed::End => true,
            },
            event = self.runs.events.recv(), if self.runs.open => {
                self.runs.see(event).await;
                false
            }
        }
    }
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
