//! `chela chat` beside a running gateway (or another `chela chat`): the store is theirs, so
//! the chat goes through their RPC instead of refusing. The terminal's own session by
//! default (`--session` picks another); on a terminal the same prompt, live view, spinner
//! and tool lines as a chat of its own ([`super::screen`]); `/stop` or Ctrl-C stops a reply
//! there; Ctrl-C while idle, Ctrl-D or the end of piped input exits. Lines typed while a
//! reply streams are sent, in order, once it has ended. The exit status is 1 when a turn
//! failed.

use std::collections::VecDeque;
use std::process::ExitCode;

use chela::agent::run::RunStatus;
use chela::config::LoadedConfig;
use chela::domain::events::RunEvent;
use chela::domain::run::{RunError, RunRecord};
use chela_terminal::editor::Typed;
use chela_terminal::{Note, TerminalChannel};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::agent::Output;
use super::screen::{self, Shows};

/// Where the chat's lines come from.
enum Lines {
    /// The line editor (a person at a terminal).
    Editor(tokio::sync::mpsc::Receiver<Typed>),
    /// Lines of stdin (piped in).
    Stdin(tokio::io::Lines<BufReader<tokio::io::Stdin>>),
}

impl Lines {
    /// The next thing typed (Ctrl-C on stdin counts as an interrupt).
    async fn next(&mut self) -> Typed {
        match self {
            Lines::Editor(rx) => rx.recv().await.unwrap_or(Typed::End),
            Lines::Stdin(lines) => tokio::select! {
                line = lines.next_line() => match line {
                    Ok(Some(line)) => Typed::Line(line),
                    _ => Typed::End,
                },
                _ = tokio::signal::ctrl_c() => Typed::Interrupt,
            },
        }
    }
}

/// Chats through the RPC of the gateway holding the store, in session `session` (else the
/// terminal's own), `preface` (the commands `--new` and `--model` stand for) first.
pub async fn chat(
    loaded: &LoadedConfig,
    preface: Vec<String>,
    session: Option<String>,
) -> ExitCode {
    let (terminal, typed, _modes) = screen::open(loaded, super::terminal_user(loaded));
    let key = session
        .unwrap_or_else(|| chela::intake::session_key_of(&loaded.config, &terminal.inbound("")));
    match terminal.is_live() {
        true => {
            let banner = format!(
                "chela chat · a gateway runs on this store: chatting through it · session \
                 {key} · /stop or Ctrl-C stops a reply, Ctrl-D leaves"
            );
            let _ = terminal.note_as(Note::Info, &banner);
        }
        // Piped: stdout holds the replies alone.
        false => eprintln!(
            "chela: a gateway runs on this store: chatting through it, in session {key} \
             (/stop or Ctrl-C stops a reply; Ctrl-D exits)"
        ),
    }
    let mut shows = Shows::new(loaded, terminal.clone(), true);
    let mut lines = match typed {
        Some(rx) => Lines::Editor(rx),
        None => Lines::Stdin(BufReader::new(tokio::io::stdin()).lines()),
    };
    let mut waiting: VecDeque<String> = preface.into();
    let mut failed = false;
    loop {
        let line = match waiting.pop_front() {
            Some(line) => line,
            None => match lines.next().await {
                Typed::Line(line) => line,
                Typed::Interrupt | Typed::End => break,
            },
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if shows.usage_command(line) {
            continue;
        }
        let code = turn(loaded, &key, line, &mut shows, &mut lines, &mut waiting).await;
        failed |= code != ExitCode::SUCCESS;
    }
    terminal.settle();
    match failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// One turn: `line` sent, its run shown until it ends. Ctrl-C stops it; lines typed
/// meanwhile wait in `waiting`.
async fn turn(
    loaded: &LoadedConfig,
    key: &str,
    line: &str,
    shows: &mut Shows,
    lines: &mut Lines,
    waiting: &mut VecDeque<String>,
) -> ExitCode {
    let terminal = shows.terminal.clone();
    let mut watch = |event: &Value| match event["event"].as_str() {
        Some("run") => show_end(shows, key, event),
        _ => {
            if let Ok(event) = serde_json::from_value::<RunEvent>(event.clone()) {
                shows.show(&event);
            }
        }
    };
    let turn = super::agent::through_rpc(
        loaded,
        line.to_owned(),
        Some(key.to_owned()),
        Output::Watch(&mut watch),
    );
    tokio::pin!(turn);
    let mut typing = true;
    let code = loop {
        tokio::select! {
            code = &mut turn => break code,
            typed = lines.next(), if typing => match typed {
                Typed::Line(line) if line.trim() == "/stop" => stop(loaded, key, &terminal).await,
                Typed::Line(line) => waiting.push_back(line),
                Typed::Interrupt => stop(loaded, key, &terminal).await,
                Typed::End => typing = false,
            },
            // The input has ended (and with it the editor): Ctrl-C is a signal again.
            _ = tokio::signal::ctrl_c(), if !typing => stop(loaded, key, &terminal).await,
        }
    };
    // A turn that failed before its end was told leaves nothing turning or half shown.
    terminal.unspin();
    terminal.end_stream();
    code
}

/// Shows the end of a run as the RPC tells it (see [`super::agent::Output::Watch`]): the
/// whole text when the stream missed some, the error, the tokens.
fn show_end(shows: &Shows, key: &str, result: &Value) {
    let terminal = &shows.terminal;
    let text = result["text"].as_str().unwrap_or_default();
    let streamed = result["streamed"].as_bool().unwrap_or(false);
    let complete = result["complete"].as_bool().unwrap_or(false);
    let shown_whole = streamed && complete;
    if !(shown_whole || text.is_empty()) {
        terminal.end_stream();
        if streamed {
            let missed = "chela: some of the streamed text was missed; the whole answer follows";
            let _ = terminal.note_as(Note::Error, missed);
        }
        terminal.stream(text);
    }
    shows.show(&RunEvent::Finished(Box::new(ended(key, result))));
    let said = match result["status"].as_str() {
        Some("ok" | "aborted") => None,
        Some("timeout") => {
            Some("the run did not end in time; it goes on in the gateway".to_owned())
        }
        _ => Some(
            result["error"]
                .as_str()
                .unwrap_or("the run failed")
                .to_owned(),
        ),
    };
    if let Some(said) = said {
        screen::tell(terminal, Note::Error, &format!("chela: {said}"));
    }
}

/// The record of a run as the RPC tells its end (`agent.wait`'s result): what the screen
/// shows of it (the reply's end, its tokens).
fn ended(key: &str, result: &Value) -> RunRecord {
    let status = match result["status"].as_str() {
        Some("ok") => RunStatus::Ok,
        Some("aborted") => RunStatus::Aborted,
        _ => RunStatus::Error(RunError::Model(
            result["error"]
                .as_str()
                .unwrap_or("the run failed")
                .to_owned(),
        )),
    };
    RunRecord {
        run_id: result["runId"].as_str().unwrap_or_default().to_owned(),
        seqs: Vec::new(),
        session_key: key.to_owned(),
        status,
        text: result["text"].as_str().unwrap_or_default().to_owned(),
        started_ms: result["startedAt"].as_u64().unwrap_or(0),
        ended_ms: result["endedAt"].as_u64().unwrap_or(0),
        usage: serde_json::from_value(result["usage"].clone()).unwrap_or_default(),
        context_tokens: result["contextTokens"].as_u64().unwrap_or(0),
        cost_usd: result["costUsd"].as_f64(),
    }
}

/// Stops the run of session `key` where it runs (as `/stop`).
async fn stop(loaded: &LoadedConfig, key: &str, terminal: &TerminalChannel) {
    if terminal.is_live() {
        let _ = terminal.note_as(Note::Error, "[stopping]");
    }
    let failed = match super::rpc::connect(loaded).await {
        Ok(mut client) => {
            let stopped = client.call("abort", json!({ "session": key })).await;
            client.close().await;
            stopped.err().map(|e| e.to_string())
        }
        Err(e) => Some(e.to_string()),
    };
    if let Some(e) = failed {
        let said = format!("chela: cannot stop the reply: {e}");
        screen::tell(terminal, Note::Error, &said);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_event_becomes_the_record_the_screen_shows() {
        let ok = ended(
            "k",
            &json!({"event": "run", "runId": "run-4", "status": "ok", "text": "hi",
                    "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                              "totalTokens": 12}, "contextTokens": 10}),
        );
        assert_eq!(ok.status, RunStatus::Ok);
        assert_eq!(
            (ok.usage.input, ok.usage.output, ok.context_tokens),
            (10, 2, 10)
        );
        let failed = ended("k", &json!({"status": "error", "error": "boom"}));
        assert_eq!(
            failed.status,
            RunStatus::Error(RunError::Model("boom".into()))
        );
        assert_eq!(failed.usage, Default::default());
    }
}
