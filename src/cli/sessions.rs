//! `chela sessions list|show|export|import`.

use std::io::{BufReader, Write};
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
    },
    /// Read a JSONL transcript into a new session.
    Import {
        /// Session key to create.
        key: String,
        /// Input file (default: stdin).
        #[arg(long = "in")]
        input: Option<PathBuf>,
    },
}

/// Runs a sessions command against the store. While a gateway holds the store, `list`
/// asks it over the RPC; the others need the gateway stopped.
pub async fn run(loaded: LoadedConfig, command: SessionsCommand) -> ExitCode {
    let store = match Store::open(&loaded.config.store.path) {
        Ok(store) => store,
        Err(StoreError::Locked { .. }) if matches!(command, SessionsCommand::List) => {
            return list_through_rpc(&loaded).await;
        }
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        SessionsCommand::List => store.list_sessions().map(|sessions| print_list(&sessions)),
        SessionsCommand::Show { key } => store.render_text(&key).map(|text| print!("{text}")),
        SessionsCommand::Export { key, out } => match out {
            Some(path) => match std::fs::File::create(&path) {
                Ok(file) => {
                    let mut writer = std::io::BufWriter::new(file);
                    store.export(&key, &mut writer).map(|_| {
                        let _ = writer.flush();
                    })
                }
                Err(e) => {
                    eprintln!("chela: cannot create {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            },
            None => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                store.export(&key, &mut lock).map(|_| {
                    let _ = lock.flush();
                })
            }
        },
        SessionsCommand::Import { key, input } => {
            let imported = match input {
                Some(path) => match std::fs::File::open(&path) {
                    Ok(file) => store.import(&key, BufReader::new(file)),
                    Err(e) => {
                        eprintln!("chela: cannot open {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                },
                None => store.import(&key, std::io::stdin().lock()),
            };
            imported.map(|n| eprintln!("imported {n} entries into {key}"))
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

/// Prints one line per session.
fn print_list(sessions: &[SessionMeta]) {
    if sessions.is_empty() {
        println!("no sessions");
    }
    for s in sessions {
        let updated = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(s.updated_ms),
        );
        println!("{}\t{} entries\tupdated {}", s.key, s.entries, updated);
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
