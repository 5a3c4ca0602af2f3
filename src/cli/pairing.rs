//! `chela pairing list|approve|reject`: the owner's side of DM pairing.

use std::process::ExitCode;

use chela::agent::message::now_ms;
use chela::config::LoadedConfig;
use chela::store::Store;
use clap::Subcommand;

/// Pairing actions.
#[derive(Subcommand)]
pub enum PairingCommand {
    /// List pending pairing requests.
    List,
    /// Let the sender of CODE message the bot directly.
    Approve {
        /// Channel name (e.g. telegram).
        channel: String,
        /// The code the sender was given.
        code: String,
    },
    /// Refuse the sender of CODE.
    Reject {
        /// Channel name.
        channel: String,
        /// The code the sender was given.
        code: String,
    },
}

/// Runs a pairing action against the store (the gateway must not be running).
pub async fn run(loaded: LoadedConfig, command: PairingCommand) -> ExitCode {
    let store = match Store::open(&loaded.config.store.path) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let now = now_ms();
    let result = match command {
        PairingCommand::List => store.pairing_requests(now).map(|requests| {
            if requests.is_empty() {
                println!("no pending pairing requests");
            }
            for r in requests {
                let minutes = now.saturating_sub(r.created_ms) / 60_000;
                println!(
                    "{}\t{}\t{} ({})\t{} min ago",
                    r.channel, r.code, r.sender_name, r.sender_id, minutes
                );
            }
            true
        }),
        PairingCommand::Approve { channel, code } => store
            .approve_pairing(&channel, &code, now)
            .await
            .map(|approved| match approved {
                Some((r, owner)) => {
                    println!(
                        "approved {} ({}) on {channel}{}",
                        r.sender_name,
                        r.sender_id,
                        if owner {
                            "; they are now the owner"
                        } else {
                            ""
                        }
                    );
                    true
                }
                None => {
                    eprintln!(
                        "chela: no pending code {code} on {channel} (expired or already used?)"
                    );
                    false
                }
            }),
        PairingCommand::Reject { channel, code } => store
            .reject_pairing(&channel, &code, now)
            .await
            .map(|rejected| match rejected {
                Some(r) => {
                    println!("rejected {} ({}) on {channel}", r.sender_name, r.sender_id);
                    true
                }
                None => {
                    eprintln!("chela: no pending code {code} on {channel}");
                    false
                }
            }),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}
