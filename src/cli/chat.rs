//! `chela chat` and `chela gateway`: the terminal channel on a live gateway.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chela::config::LoadedConfig;
use chela_terminal::TerminalChannel;
use tokio_util::sync::CancellationToken;

/// A second Ctrl-C within this window exits even while a run is stopping.
const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);

/// `chela chat`: Ctrl-C stops the current run; Ctrl-C when idle, a second Ctrl-C, or Ctrl-D
/// (after the last reply) exits.
pub async fn chat(loaded: LoadedConfig) -> ExitCode {
    let terminal = TerminalChannel::new(super::terminal_user(&loaded));
    let gateway = match super::start(&loaded, vec![terminal.clone()]).await {
        Ok(g) => g,
        Err(code) => return code,
    };
    if let Err(code) = super::serve_rpc(&gateway).await {
        return code;
    }
    let key = gateway.core().session_key(&terminal.inbound(""));
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
            // Ctrl-D: answer what was typed, then exit.
            _ = &mut channels, if !input_done => input_done = true,
            // ... and what its sub-agents report back.
            _ = chela::gateway::subagent::wait_settled(gateway.core(), &key), if input_done => break,
        }
    }
    stop.cancel();
    gateway.shutdown().await;
    ExitCode::SUCCESS
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
