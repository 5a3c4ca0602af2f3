//! `chela status`: channels, live runs, queue depths, undelivered replies and dead letters.
//! Reads the store directly when no gateway runs; asks the running gateway over its RPC when
//! the store is in use.

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::rpc::status::StatusReport;
use chela::store::{Store, StoreError};

/// Prints the gateway's state.
pub async fn status(loaded: LoadedConfig) -> ExitCode {
    let store = match Store::open_config(&loaded.config) {
        Ok(store) => store,
        Err(StoreError::Locked { .. }) => return through_rpc(&loaded).await,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    match StatusReport::from_store(&store, &loaded.config.store.describe(), configured(&loaded)) {
        Ok(report) => {
            print!("{}", report.render());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chela: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The channels the config would run.
fn configured(loaded: &LoadedConfig) -> Vec<String> {
    let mut names: Vec<String> = crate::cli::platforms::configured(&loaded.config)
        .map(|p| p.name.to_owned())
        .collect();
    if names.is_empty() {
        names.push("terminal (no platform token set)".into());
    }
    names
}

async fn through_rpc(loaded: &LoadedConfig) -> ExitCode {
    let result = async {
        let mut client = super::rpc::connect(loaded).await?;
        let value = client.call("status", serde_json::json!({})).await?;
        serde_json::from_value::<StatusReport>(value)
            .map_err(|e| chela::rpc::client::ClientError::Protocol(e.to_string()))
    }
    .await;
    match result {
        Ok(report) => {
            print!("{}", report.render());
            ExitCode::SUCCESS
        }
        Err(e) => super::rpc::report(&e),
    }
}
