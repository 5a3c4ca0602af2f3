//! `chela chat` beside a running gateway (or another `chela chat`): the store is theirs, so
//! the chat goes through their RPC instead of refusing. The terminal's own session by
//! default (`--session` picks another); each reply streams as it comes; `/stop` or Ctrl-C
//! stops a reply there; Ctrl-C while idle, Ctrl-D or the end of piped input exits. Lines are
//! read as the terminal gives them (no line editor); the exit status is 1 when a turn failed.

use std::collections::VecDeque;
use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela_terminal::TerminalChannel;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Chats through the RPC of the gateway holding the store, in session `session` (else the
/// terminal's own), `preface` (the commands `--new` and `--model` stand for) first.
pub async fn chat(
    loaded: &LoadedConfig,
    preface: Vec<String>,
    session: Option<String>,
) -> ExitCode {
    let key = session.unwrap_or_else(|| {
        let terminal = TerminalChannel::new(super::terminal_user(loaded));
        chela::intake::session_key_of(&loaded.config, &terminal.inbound(""))
    });
    eprintln!(
        "chela: a gateway runs on this store: chatting through it, in session {key} \
         (/stop or Ctrl-C stops a reply; Ctrl-D exits)"
    );
    let mut preface: VecDeque<String> = preface.into();
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let mut failed = false;
    loop {
        let line = match preface.pop_front() {
            Some(line) => line,
            None => tokio::select! {
                line = input.next_line() => match line {
                    Ok(Some(line)) => line,
                    _ => break,
                },
                _ = tokio::signal::ctrl_c() => break,
            },
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let turn = super::agent::through_rpc(loaded, line.to_owned(), Some(key.clone()), false);
        tokio::pin!(turn);
        let code = loop {
            tokio::select! {
                code = &mut turn => break code,
                _ = tokio::signal::ctrl_c() => stop(loaded, &key).await,
            }
        };
        failed |= code != ExitCode::SUCCESS;
    }
    match failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// Stops the run of session `key` where it runs (as `/stop`).
async fn stop(loaded: &LoadedConfig, key: &str) {
    match super::rpc::connect(loaded).await {
        Ok(mut client) => {
            if let Err(e) = client.call("abort", json!({ "session": key })).await {
                eprintln!("chela: cannot stop the reply: {e}");
            }
            client.close().await;
        }
        Err(e) => eprintln!("chela: cannot stop the reply: {e}"),
    }
}
