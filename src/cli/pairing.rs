//! `chela pairing list|approve|reject`: the owner's side of DM pairing.

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::domain::message::now_ms;
use chela::domain::text::quoted;
use chela::store::{PairingRequest, Store, StoreError};
use clap::Subcommand;
use serde_json::{Value, json};

/// Pairing actions.
#[derive(Subcommand)]
pub enum PairingCommand {
    /// List pending pairing requests.
    List,
    /// Let the sender of CODE message the bot directly.
    Approve {
        /// Channel name: a chat platform (telegram, discord).
        #[arg(value_parser = crate::cli::platforms::name_parser())]
        channel: String,
        /// The code the sender was given.
        code: String,
    },
    /// Refuse the sender of CODE.
    Reject {
        /// Channel name: a chat platform (telegram, discord).
        #[arg(value_parser = crate::cli::platforms::name_parser())]
        channel: String,
        /// The code the sender was given.
        code: String,
    },
}

/// Runs a pairing action: on the store when no gateway runs, else through the gateway's RPC.
pub async fn run(loaded: LoadedConfig, command: PairingCommand) -> ExitCode {
    let may_make_owner = loaded.config.commands.pairing_makes_owners();
    let result = match Store::open_config(&loaded.config) {
        Ok(store) if store.engine() == "postgresql" => {
            shared(&loaded, &store, &command, may_make_owner).await
        }
        Ok(store) => direct(&store, &command, may_make_owner, true)
            .await
            .map_err(|e| e.to_string()),
        Err(StoreError::Locked { .. }) => match super::rpc::connect(&loaded).await {
            Ok(client) => through_rpc(client, &command).await,
            Err(e) => Err(e.to_string()),
        },
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let done = result.map(|outcome| outcome.print(&command));
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The name a stranger chose, as untrusted text: quoted, escaped, cut, and marked.
fn shown_name(r: &PairingRequest) -> String {
    format!("name {} (unverified)", quoted(&r.sender_name))
}

/// What a pairing action found, from the store or the RPC.
enum Outcome {
    /// The pending requests.
    Listed(Vec<PairingRequest>),
    /// The approved request (and whether its sender became the owner), if the code was pending.
    Approved(Option<(PairingRequest, bool)>),
    /// The rejected request, if the code was pending.
    Rejected(Option<PairingRequest>),
}

impl Outcome {
    /// Prints the outcome; false when the code was not pending.
    fn print(self, command: &PairingCommand) -> bool {
        let (channel, code) = match command {
            PairingCommand::Approve { channel, code }
            | PairingCommand::Reject { channel, code } => (channel.as_str(), code.as_str()),
            PairingCommand::List => ("", ""),
        };
        match self {
            Outcome::Listed(requests) => {
                if requests.is_empty() {
                    println!("no pending pairing requests");
                }
                let now = now_ms();
                for r in requests {
                    let minutes = now.saturating_sub(r.created_ms) / 60_000;
                    println!(
                        "{}\t{}\t{} (id {})\t{} min ago",
                        r.channel,
                        r.code,
                        shown_name(&r),
                        r.sender_id,
                        minutes
                    );
                }
                true
            }
            Outcome::Approved(Some((r, owner))) => {
                let role = if owner {
                    "they are now the OWNER (the first approval while commands.owner_allow_from is empty): they may run /acp, /session and /approve"
                } else {
                    "they may message the bot directly; they are NOT an owner"
                };
                println!(
                    "approved {} (id {}) on {channel}; {role}",
                    shown_name(&r),
                    r.sender_id
                );
                true
            }
            Outcome::Approved(None) => {
                eprintln!("chela: no pending code {code} on {channel} (expired or already used?)");
                false
            }
            Outcome::Rejected(Some(r)) => {
                println!(
                    "rejected {} (id {}) on {channel}",
                    shown_name(&r),
                    r.sender_id
                );
                true
            }
            Outcome::Rejected(None) => {
                eprintln!("chela: no pending code {code} on {channel}");
                false
            }
        }
    }
}

/// On PostgreSQL, which opens while gateways run: through the gateway the RPC reaches, so
/// the stranger it approves is told at once (and their held messages answered); else on the
/// store, and the stranger is told nothing (they are let in when they write).
async fn shared(
    loaded: &LoadedConfig,
    store: &Store,
    command: &PairingCommand,
    may_make_owner: bool,
) -> Result<Outcome, String> {
    match super::rpc::connect(loaded).await {
        Ok(client) => through_rpc(client, command).await,
        Err(e) => {
            if matches!(command, PairingCommand::Approve { .. }) {
                eprintln!(
                    "chela: no gateway answered ({e}); approving in the store: the sender is not told, and is let in when they write"
                );
            }
            direct(store, command, may_make_owner, false)
                .await
                .map_err(|e| e.to_string())
        }
    }
}

/// The action on `store` itself; an approval is noted for the next gateway to tell the
/// stranger when `note_welcome` (the embedded store, which no gateway holds now).
async fn direct(
    store: &Store,
    command: &PairingCommand,
    may_make_owner: bool,
    note_welcome: bool,
) -> Result<Outcome, StoreError> {
    let now = now_ms();
    Ok(match command {
        PairingCommand::List => Outcome::Listed(store.pairing_requests(now)?),
        PairingCommand::Approve { channel, code } => {
            let approved = store
                .approve_pairing(channel, code, now, may_make_owner)
                .await?;
            // No gateway runs: the next one to start tells the stranger they are in.
            if let Some((request, _)) = approved.as_ref().filter(|_| note_welcome)
                && let Err(e) = chela::questions::offline::note(store, request).await
            {
                eprintln!(
                    "chela: approved, but the next gateway cannot tell them so ({e}): tell them yourself"
                );
            }
            Outcome::Approved(approved)
        }
        PairingCommand::Reject { channel, code } => {
            Outcome::Rejected(store.reject_pairing(channel, code, now).await?)
        }
    })
}

async fn through_rpc(
    mut client: chela::rpc::client::RpcClient,
    command: &PairingCommand,
) -> Result<Outcome, String> {
    let (method, params) = match command {
        PairingCommand::List => ("pairing.list", json!({})),
        PairingCommand::Approve { channel, code } => {
            ("pairing.approve", json!({"channel": channel, "code": code}))
        }
        PairingCommand::Reject { channel, code } => {
            ("pairing.reject", json!({"channel": channel, "code": code}))
        }
    };
    let value = client
        .call(method, params)
        .await
        .map_err(|e| e.to_string())?;
    let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    let decoded = match command {
        PairingCommand::List => serde_json::from_value(field("requests")).map(Outcome::Listed),
        PairingCommand::Approve { .. } => {
            let owner = field("owner").as_bool().unwrap_or(false);
            serde_json::from_value::<Option<PairingRequest>>(field("request"))
                .map(|r| Outcome::Approved(r.map(|r| (r, owner))))
        }
        PairingCommand::Reject { .. } => {
            serde_json::from_value(field("request")).map(Outcome::Rejected)
        }
    };
    decoded.map_err(|e| format!("unexpected answer from the gateway: {e}"))
}
