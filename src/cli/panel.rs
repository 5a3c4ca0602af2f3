//! `chela panel`: where the running gateway's control panel is and how to log in. It never
//! prints a token: the operator copies it from the discovery file, readable by this user only.

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::rpc::discovery;

/// Prints the panel's URL and how to log in.
pub fn panel(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config;
    if config.rpc.address().is_none() || !config.rpc.panel {
        eprintln!(
            "chela: the control panel is off: it needs [rpc] listen set and [rpc] panel = true"
        );
        return ExitCode::FAILURE;
    }
    let path = discovery::path_for(&config.store.path);
    let Some(found) = discovery::read(&path) else {
        println!(
            "No gateway is running with this store; once `chela gateway` runs, the panel is at http://{}/panel",
            config.rpc.listen.trim()
        );
        return ExitCode::FAILURE;
    };
    println!("Control panel: http://{}/panel", found.address);
    println!(
        "Log in with the operator token (every action), the operator_token field of {}:",
        path.display()
    );
    println!("  jq -r .operator_token {}", path.display());
    println!("or with the client token ([rpc] token) for the read-only pages.");
    ExitCode::SUCCESS
}
