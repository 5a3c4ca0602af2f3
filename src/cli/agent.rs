//! `chela agent --message TEXT [--session KEY] [--json]`: one turn for scripts. Runs its own
//! gateway on the store; when a running gateway holds the store, sends the turn through that
//! gateway's RPC instead (`events.subscribe`, `agent`, then `agent.wait`, printing the run's
//! text deltas as they come).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use chela::agent::run::RunStatus;
use chela::config::LoadedConfig;
use chela::domain::events::LiveEvent;
use chela::domain::events::RunEvent;
use chela::domain::session_key::SessionKey;
use chela::gateway::{Gateway, GatewayError};
use chela::inbound::route::Accepted;
use chela::store::StoreError;
use chela_terminal::TerminalChannel;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::TryRecvError;

/// Runs one turn, prints the reply (streamed, or as JSON), exits 1 when the run failed.
pub async fn agent(
    loaded: LoadedConfig,
    message: String,
    session: Option<String>,
    json: bool,
) -> ExitCode {
    let session = match session {
        Some(key) => match SessionKey::parse(&key) {
            Ok(parsed) => Some(parsed.to_string()),
            Err(e) => {
                eprintln!("chela: --session {key}: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    // A cluster node's store is shared, so opening it would not say whether a gateway runs
    // here; and a second process joining the cluster under this node's id would give its
    // leases away when it ends. Ask the local gateway instead.
    if loaded.config.cluster.enabled {
        return through_rpc(&loaded, message, session, Output::text_or_json(json)).await;
    }
    let user = super::terminal_user(&loaded);
    let terminal = if json {
        TerminalChannel::quiet(user)
    } else {
        TerminalChannel::new(user)
    };
    let started = Gateway::start(
        loaded.config.clone(),
        vec![terminal.clone() as Arc<dyn chela_channel::Channel>],
    )
    .await;
    let gateway = match started {
        Ok(g) => g,
        Err(GatewayError::Store(StoreError::Locked { .. })) => {
            return through_rpc(&loaded, message, session, Output::text_or_json(json)).await;
        }
        Err(e) => return super::start_failed(e),
    };
    let inbound = terminal.inbound(&message);
    let key = session.unwrap_or_else(|| gateway.session_key(&inbound));
    let mut events = gateway.subscribe_events();
    let command = match gateway.router().accept_tracked(key.clone(), inbound).await {
        Ok(accepted) => accepted == Accepted::Command,
        Err(e) => {
            eprintln!("chela: {e}");
            gateway.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    // Sub-agents it spawned report back into this session; their follow-up is the answer.
    gateway.wait_settled(&key).await;
    let mut last = None;
    loop {
        match events.try_recv() {
            Ok(LiveEvent {
                event: RunEvent::Finished(record),
                ..
            }) if record.session_key == key => last = Some(record),
            Ok(_) | Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    gateway.shutdown().await;
    let Some(record) = last else {
        // A command (e.g. /status) answers without a run: its answer is what the terminal
        // showed (and, with --json, kept).
        if json && command {
            let answer = json!({
                "sessionKey": key,
                "status": "ok",
                "command": true,
                "text": terminal.said().join("\n"),
            });
            println!("{answer}");
        }
        return ExitCode::SUCCESS;
    };
    let error = match &record.status {
        RunStatus::Error(e) => Some(e.to_string()),
        _ => None,
    };
    let result = json!({
        "runId": record.run_id,
        "sessionKey": record.session_key,
        "status": chela::rpc::runs::status_name(&record.status),
        "text": record.text,
        "startedAt": record.started_ms,
        "endedAt": record.ended_ms,
        "error": error,
    });
    // The terminal channel has shown the run's error as its reply already.
    finish(&result, json, Shown::Reply)
}

/// Where a turn through the RPC shows its run.
pub(super) enum Output<'a> {
    /// The reply's text as it streams, then the result's error (`chela agent`).
    Text,
    /// The result as JSON (`chela agent --json`).
    Json,
    /// Each `agent` event of the run handed to the watcher (a chat's screen), then the result
    /// as an event `run` (as `events.subscribe` pushes it) with `streamed` (text was shown)
    /// and `complete` (no event was missed); nothing is printed.
    Watch(&'a mut (dyn FnMut(&Value) + Send)),
}

impl Output<'_> {
    fn text_or_json(json: bool) -> Output<'static> {
        match json {
            true => Output::Json,
            false => Output::Text,
        }
    }
}

/// The turn through the running gateway's RPC.
pub(super) async fn through_rpc(
    loaded: &LoadedConfig,
    message: String,
    session: Option<String>,
    output: Output<'_>,
) -> ExitCode {
    let json = matches!(output, Output::Json);
    let mut client = match super::rpc::connect(loaded).await {
        Ok(client) => client,
        Err(e) => return super::rpc::report(&e),
    };
    // Subscribed first, so no event of the run is missed; its text deltas are printed as they
    // come (unless --json), like a run in this process.
    if let Err(e) = client.call("events.subscribe", json!({})).await {
        return super::rpc::report(&e);
    }
    let mut params = json!({ "message": message });
    if let Some(key) = &session {
        params["session"] = Value::String(key.clone());
    }
    let mut early = Vec::new();
    let accepted = match client
        .call_watching("agent", params, &mut |event| early.push(event.clone()))
        .await
    {
        Ok(accepted) => accepted,
        Err(e) => return super::rpc::report(&e),
    };
    let run_id = accepted["runId"].as_str().unwrap_or_default().to_owned();
    let mut printer = DeltaPrinter::new(&run_id, output);
    for event in &early {
        printer.see(event);
    }
    // From now on only this session's events (other sessions' traffic cannot crowd them out).
    if let Some(key) = accepted["session"].as_str() {
        let narrowed = client
            .call_watching(
                "events.subscribe",
                json!({ "session": key }),
                &mut |event| printer.see(event),
            )
            .await;
        if let Err(e) = narrowed {
            return super::rpc::report(&e);
        }
    }
    // The run ends by its own timeout; wait a little longer than that.
    let timeout_ms = loaded
        .config
        .agent
        .timeout_s
        .saturating_add(60)
        .saturating_mul(1000);
    let waited = client
        .call_watching(
            "agent.wait",
            json!({ "runId": run_id, "timeoutMs": timeout_ms }),
            &mut |event| printer.see(event),
        )
        .await;
    client.close().await;
    let (streamed, complete) = printer.end();
    let mut result = match waited {
        Ok(result) => result,
        Err(e) => return super::rpc::report(&e),
    };
    if let Output::Watch(watch) = &mut printer.output {
        // The watcher shows it all: what was missed of the text, the error.
        let mut ended = result.clone();
        ended["event"] = Value::String("run".to_owned());
        ended["streamed"] = Value::Bool(streamed);
        ended["complete"] = Value::Bool(complete);
        watch(&ended);
        return exit_code(&result);
    }
    if streamed && !complete {
        eprintln!("chela: some of the streamed text was missed; the whole answer follows");
    }
    result["sessionKey"] = accepted["session"].clone();
    let shown = if !streamed || !complete {
        Shown::Nothing
    } else {
        Shown::Text
    };
    finish(&result, json, shown)
}

/// What of a run's result the terminal has shown already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Nothing: print the text and say the error.
    Nothing,
    /// The streamed text: say the error.
    Text,
    /// The reply, an error's notice included: nothing more to say.
    Reply,
}

/// Prints the assistant text deltas of one run as its `agent` events arrive (or hands every
/// event to a watcher), and notices a gap in their numbering (a feed that dropped events).
struct DeltaPrinter<'a> {
    run_id: String,
    output: Output<'a>,
    printed: bool,
    /// The last event number seen of this run.
    last_seq: u64,
    gap: bool,
}

impl<'a> DeltaPrinter<'a> {
    fn new(run_id: &str, output: Output<'a>) -> DeltaPrinter<'a> {
        DeltaPrinter {
            run_id: run_id.to_owned(),
            output,
            printed: false,
            last_seq: 0,
            gap: false,
        }
    }

    /// Prints `event` when it is a text delta of this run (once, even if it comes twice).
    fn see(&mut self, event: &Value) {
        let ours = event["event"] == "agent" && event["runId"] == self.run_id.as_str();
        let Some(seq) = event["seq"].as_u64().filter(|_| ours) else {
            return;
        };
        if seq <= self.last_seq {
            return;
        }
        self.gap |= seq != self.last_seq + 1;
        self.last_seq = seq;
        let delta = event["delta"]
            .as_str()
            .filter(|_| event["stream"] == "assistant");
        if let Output::Watch(watch) = &mut self.output {
            watch(event);
            self.printed |= delta.is_some();
            return;
        }
        if !matches!(self.output, Output::Text) {
            return;
        }
        if let Some(delta) = delta {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(delta.as_bytes());
            let _ = out.flush();
            self.printed = true;
        }
    }

    /// Ends the streamed text with a newline; answers whether anything was printed and
    /// whether every event of the run was seen.
    fn end(&mut self) -> (bool, bool) {
        if self.printed && matches!(self.output, Output::Text) {
            println!();
        }
        (self.printed, !self.gap)
    }
}

/// Prints a run's result (what the terminal has not `shown`) and gives the exit code: 1
/// unless it ended `ok` or `aborted`.
fn finish(result: &Value, json: bool, shown: Shown) -> ExitCode {
    let status = result["status"].as_str().unwrap_or("error");
    if json {
        println!("{result}");
    } else {
        let text = result["text"].as_str().unwrap_or_default();
        if shown == Shown::Nothing && !text.is_empty() {
            println!("{text}");
        }
        match status {
            "ok" | "aborted" => {}
            _ if shown == Shown::Reply => {}
            "timeout" => eprintln!("chela: the run did not end in time; it goes on in the gateway"),
            _ => eprintln!(
                "chela: {}",
                result["error"].as_str().unwrap_or("the run failed")
            ),
        }
    }
    exit_code(result)
}

/// 0 when a run's result is `ok` or `aborted`, else 1.
fn exit_code(result: &Value) -> ExitCode {
    match result["status"].as_str() {
        Some("ok" | "aborted") => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(seq: u64, text: &str) -> Value {
        json!({"event": "agent", "runId": "run-1", "seq": seq, "stream": "assistant", "delta": text})
    }

    #[test]
    fn repeated_events_are_skipped_and_a_gap_is_noticed() {
        let mut printer = DeltaPrinter::new("run-1", Output::Json);
        printer.see(&delta(1, "a"));
        printer.see(&delta(1, "a"));
        printer.see(&delta(2, "b"));
        printer.see(&json!({"event": "agent", "runId": "run-2", "seq": 9}));
        assert!(!printer.gap);
        printer.see(&delta(4, "d"));
        assert!(printer.gap);
        assert_eq!(printer.end(), (false, false));
    }
}
