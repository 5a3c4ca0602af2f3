//! `chela agent --message TEXT [--session KEY] [--json]`: one turn for scripts.

use std::process::ExitCode;
use std::sync::Arc;

use chela::agent::run::RunStatus;
use chela::config::LoadedConfig;
use chela::inbound::session_key::SessionKey;
use chela_terminal::TerminalChannel;

/// Runs one turn, prints the reply (streamed, or as JSON), exits 1 when the run failed.
pub async fn agent(
    loaded: LoadedConfig,
    message: String,
    session: Option<String>,
    json: bool,
) -> ExitCode {
    let user = super::terminal_user(&loaded);
    let terminal = if json {
        TerminalChannel::quiet(user)
    } else {
        TerminalChannel::new(user)
    };
    let gateway = match super::start(
        &loaded,
        vec![terminal.clone() as Arc<dyn chela_channel::Channel>],
    )
    .await
    {
        Ok(g) => g,
        Err(code) => return code,
    };
    let inbound = terminal.inbound(&message);
    let key = match session {
        Some(key) => match SessionKey::parse(&key) {
            Ok(parsed) => parsed.to_string(),
            Err(e) => {
                eprintln!("chela: --session {key}: {e}");
                return ExitCode::from(2);
            }
        },
        None => gateway.core().session_key(&inbound),
    };
    let mut runs = gateway.subscribe_runs();
    let accepted = gateway.router().accept_for(key.clone(), inbound).await;
    if let Err(e) = accepted {
        eprintln!("chela: {e}");
        gateway.shutdown().await;
        return ExitCode::FAILURE;
    }
    // Sub-agents it spawned report back into this session; their follow-up is the answer.
    chela::gateway::subagent::wait_settled(gateway.core(), &key).await;
    let mut last = None;
    while let Ok(record) = runs.try_recv() {
        if record.session_key == key {
            last = Some(record);
        }
    }
    gateway.shutdown().await;
    let Some(record) = last else {
        // A command (e.g. /status) answers without a run.
        return ExitCode::SUCCESS;
    };
    let (status, error) = match &record.status {
        RunStatus::Ok => ("ok", None),
        RunStatus::Aborted => ("aborted", None),
        RunStatus::Error(e) => ("error", Some(e.clone())),
    };
    if json {
        let out = serde_json::json!({
            "runId": record.run_id,
            "sessionKey": record.session_key,
            "status": status,
            "text": record.text,
            "startedAt": record.started_ms,
            "endedAt": record.ended_ms,
            "error": error,
        });
        println!("{out}");
    } else if let Some(e) = &error {
        eprintln!("chela: {e}");
    }
    if error.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
