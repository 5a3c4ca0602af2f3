//! Reaching a running gateway over its RPC, for the commands that would otherwise open the
//! store it holds (`chela agent`, `status`, `sessions list|show|export`, `pairing`, `doctor`).

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::rpc::client::{ClientError, RpcClient};

/// Connects to the RPC of the gateway holding this config's store.
pub async fn connect(loaded: &LoadedConfig) -> Result<RpcClient, ClientError> {
    chela::rpc::client::connect_to_store(
        &loaded.config.store.path,
        loaded.config.rpc.configured_token(),
    )
    .await
}

/// Prints `error` and gives the exit code: 1 for a failure the gateway reported, 2 when it
/// could not be reached.
pub fn report(error: &ClientError) -> ExitCode {
    eprintln!("chela: {error}");
    match error {
        ClientError::Fault(_) => ExitCode::FAILURE,
        _ => ExitCode::from(2),
    }
}
