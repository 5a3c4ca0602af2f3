//! `chela sessions list|show|export|import`.

use std::io::{BufReader, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::store::{SessionMeta, Store, StoreError};
use clap::Subcommand;

/// What to do with sessions.
#[derive(Subcommand)]
pub enum SessionsCommand {
    /// List sessions with their entry counts.
    List,
    /// Print a readable transcript.
    Show {
        /// Session key.
        key: String,
    },
    /// Write a transcript as JSONL (OpenClaw/pi version 4).
    Export {
        /// Session key.
        key: String,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// chela: the whole transcript, which pi and OpenClaw load (showing what follows the
        /// last reset) and chela imports back; pi: only what follows the last reset. Both
        /// with pi's `api` and `usage.cost`.
        #[arg(long, default_value = "chela", value_parser = ["chela", "pi"])]
        format: String,
    },
    /// Read a JSONL transcript into a new session.
    Import {
        /// Session key to create, e.g. agent:main:terminal:direct:alice (stored in its
        /// canonical lowercase form).
        #[arg(value_parser = session_key)]
        key: String,
        /// Input file (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
    },
}

/// Runs a sessions command against the store. While a gateway holds the store, `list`,
/// `show` and `export` ask it over the RPC; `import` needs the gateway stopped.
pub async fn run(loaded: LoadedConfig, command: SessionsCommand) -> ExitCode {
    let store = match Store::open_config(&loaded.config) {
        Ok(store) => store,
        Err(StoreError::Locked { .. }) if matches!(command, SessionsCommand::List) => {
            return list_through_rpc(&loaded).await;
        }
        Err(StoreError::Locked { .. }) if !matches!(command, SessionsCommand::Import { .. }) => {
            return transcript_through_rpc(&loaded, command).await;
        }
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        SessionsCommand::List => store.list_sessions().map(|sessions| print_list(&sessions)),
        SessionsCommand::Show { key } => store.render_text(&key).map(|text| {
            print!("{text}");
            if let Ok(entries) = store.entries(&key) {
                print_usage(&loaded, &entries);
            }
        }),
        SessionsCommand::Export { key, out, format } => {
            let mut buf = Vec::new();
            match store.export(&key, &mut buf) {
                Ok(_) => return write_export(&buf, &format, out),
                Err(e) => Err(e),
            }
        }
        SessionsCommand::Import { key, input } => {
            let mut text = Vec::new();
            let read = match &input {
                Some(path) => std::fs::File::open(path)
                    .and_then(|file| BufReader::new(file).read_to_end(&mut text)),
                None => std::io::stdin().lock().read_to_end(&mut text),
            };
            if let Err(e) = read {
                let from = input.map_or("stdin".into(), |p| p.display().to_string());
                eprintln!("chela: cannot read {from}: {e}");
                return ExitCode::from(2);
            }
            import(&store, &key, &text).map(|n| eprintln!("imported {n} entries into {key}"))
        }
    };
    let flushed = store.flush().await;
    match result.and(flushed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Imports `text`: as chela's own transcript when it is one (kept byte for byte), else as an
/// OpenClaw or pi transcript converted to chela's schema, listing on stderr what was not
/// carried over.
fn import(store: &Store, key: &str, text: &[u8]) -> Result<usize, StoreError> {
    let strict = match store.import(key, text) {
        Err(e @ StoreError::InvalidImport { .. }) => e,
        other => return other,
    };
    let Ok(utf8) = std::str::from_utf8(text) else {
        return Err(strict);
    };
    let converted = match chela::store::foreign::convert_jsonl(utf8) {
        Ok(converted) => converted,
        Err(foreign) => {
            eprintln!("chela: not an OpenClaw/pi transcript either: {foreign}");
            return Err(strict);
        }
    };
    let jsonl = converted
        .to_jsonl()
        .map_err(|e| StoreError::Encode(e.to_string()))?;
    let n = store.import(key, &jsonl[..])?;
    for (kind, count) in &converted.not_carried {
        eprintln!("not carried over: {count} × {kind}");
    }
    Ok(n)
}

/// A session key in its canonical form, or why it is not one (`sessions import` must not
/// create a session no conversation maps to).
fn session_key(text: &str) -> Result<String, chela::domain::session_key::KeyError> {
    chela::domain::session_key::SessionKey::parse(text).map(|key| key.to_string())
}

/// Prints one line per session.
fn print_list(sessions: &[SessionMeta]) {
    if sessions.is_empty() {
        println!("no sessions");
    }
    for s in sessions {
        let updated = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(s.updated_ms),
        );
        let agent = chela::domain::session_key::SessionKey::parse(&s.key)
            .map(|k| k.agent)
            .unwrap_or_default();
        println!(
            "{}\tagent {}\t{} entries\tupdated {}",
            s.key, agent, s.entries, updated
        );
    }
}

/// `sessions show` or `sessions export` from the running gateway.
async fn transcript_through_rpc(loaded: &LoadedConfig, command: SessionsCommand) -> ExitCode {
    let (method, field, key, out) = match command {
        SessionsCommand::Show { key } => ("sessions.show", "text", key, None),
        SessionsCommand::Export { key, out, format } => {
            ("sessions.export", "jsonl", key, Some((out, format)))
        }
        SessionsCommand::List | SessionsCommand::Import { .. } => return ExitCode::from(2),
    };
    let result = async {
        let mut client = super::rpc::connect(loaded).await?;
        let value = client
            .call(method, serde_json::json!({ "key": key }))
            .await?;
        client.close().await;
        value[field]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| chela::rpc::client::ClientError::Protocol(format!("no {field}")))
    }
    .await;
    let text = match result {
        Ok(text) => text,
        Err(e) => return super::rpc::report(&e),
    };
    match out {
        Some((out, format)) => write_export(text.as_bytes(), &format, out),
        None => {
            print!("{text}");
            usage_through_rpc(loaded, &key).await;
            ExitCode::SUCCESS
        }
    }
}

/// The usage of session `key`, from its transcript as the running gateway exports it.
async fn usage_through_rpc(loaded: &LoadedConfig, key: &str) {
    let exported = async {
        let mut client = super::rpc::connect(loaded).await?;
        let value = client
            .call("sessions.export", serde_json::json!({ "key": key }))
            .await?;
        client.close().await;
        Ok::<_, chela::rpc::client::ClientError>(value["jsonl"].as_str().unwrap_or("").to_owned())
    }
    .await;
    match exported {
        Ok(jsonl) => {
            let entries: Vec<chela::store::Entry> = jsonl
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect();
            print_usage(loaded, &entries);
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the session's usage"),
    }
}

/// Prints the usage of a transcript's model calls after it (nothing before the first).
fn print_usage(loaded: &LoadedConfig, entries: &[chela::store::Entry]) {
    let pricing = chela::agent::pricing::Pricing::new(loaded.config.pricing.clone());
    let window = loaded.config.model.context_window;
    if let Some(summary) = chela::agent::usage::summary(entries, &pricing, window) {
        println!("\n[usage]\n{summary}");
    }
}

/// Writes an exported transcript in `format` to `out` (stdout when `None`).
fn write_export(jsonl: &[u8], format: &str, out: Option<PathBuf>) -> ExitCode {
    let text = String::from_utf8_lossy(jsonl);
    let text = if format == "pi" {
        chela::store::pi_export::to_pi(&text)
    } else {
        chela::store::pi_export::for_pi_and_chela(&text)
    };
    let text = match text {
        Ok(text) => text,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::FAILURE;
        }
    };
    let written = match &out {
        Some(path) => std::fs::write(path, &text),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let to = out.map_or("stdout".into(), |p| p.display().to_string());
            eprintln!("chela: cannot write {to}: {e}");
            ExitCode::from(2)
        }
    }
}

/// `sessions list` from the running gateway.
async fn list_through_rpc(loaded: &LoadedConfig) -> ExitCode {
    let result = async {
        let mut client = super::rpc::connect(loaded).await?;
        let value = client.call("sessions.list", serde_json::json!({})).await?;
        client.close().await;
        serde_json::from_value::<Vec<SessionMeta>>(value["sessions"].clone())
            .map_err(|e| chela::rpc::client::ClientError::Protocol(e.to_string()))
    }
    .await;
    match result {
        Ok(sessions) => {
            print_list(&sessions);
            ExitCode::SUCCESS
        }
        Err(e) => super::rpc::report(&e),
    }
}
