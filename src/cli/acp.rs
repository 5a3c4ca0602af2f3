//! `chela acp agents`: the coding agents chela knows and whether each is installed.

use std::process::ExitCode;

use chela::acp::harness;
use chela::config::LoadedConfig;

/// `chela acp ...`.
#[derive(clap::Subcommand)]
pub enum AcpCommand {
    /// List the coding agents (built-in and `[acp.agents.*]`) and whether each is installed.
    Agents,
}

/// Runs an `acp` subcommand.
pub async fn run(loaded: LoadedConfig, command: AcpCommand) -> ExitCode {
    match command {
        AcpCommand::Agents => {
            for line in lines(&loaded.config.acp, std::env::var("PATH").ok().as_deref()) {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
    }
}

/// One line per harness: name, default mark, command, installed state.
pub fn lines(config: &chela::config::AcpConfig, path: Option<&str>) -> Vec<String> {
    config
        .harnesses()
        .iter()
        .map(|(name, h)| {
            let default = if *name == config.default_agent {
                " (default)"
            } else {
                ""
            };
            format!(
                "{name}{default}: {} — {}",
                h.command.join(" "),
                harness::installed(h, path)
            )
        })
        .collect()
}
