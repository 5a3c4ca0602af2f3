//! `chela mcp serve`: chela as an MCP server on stdio, for MCP clients such as Claude Code or
//! Codex (docs/mcp.md). Its tools (`tools.rs`) reach the running gateway through its RPC with
//! the client token only (`gateway.rs`): list the sessions, read the tail of one's
//! transcript, post a text into one's chat. Every call is bounded in time and in output
//! (`text.rs`). A tool called while no gateway runs says so; the server keeps running until
//! the client closes its input.

mod gateway;
mod text;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use chela::config::LoadedConfig;
use clap::Subcommand;
use rmcp::ServiceExt;

use super::rpc::ClientAccess;

/// `chela mcp ...`.
#[derive(Subcommand)]
pub enum McpCommand {
    /// Serve MCP on stdin/stdout: tools to list the running gateway's sessions, read the
    /// tail of one's transcript and post a text into one's chat (through its RPC, with the
    /// client token, never the operator token).
    Serve(ServeArgs),
}

/// `chela mcp serve`'s options.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The gateway's RPC, ws://HOST:PORT (default: $CHELA_RPC_URL, else the address the
    /// running gateway wrote beside its store).
    #[arg(long)]
    url: Option<String>,
    /// A file holding the RPC client token (default: $CHELA_RPC_TOKEN, else rpc.token, else
    /// the token the running gateway made).
    #[arg(long)]
    token_file: Option<PathBuf>,
}

impl McpCommand {
    /// Whether it can do without the config: `chela mcp serve` given both the RPC's address
    /// and a token (`--url` or `CHELA_RPC_URL`, `--token-file` or `CHELA_RPC_TOKEN`), as where
    /// the config cannot be read (a sandbox that hides chela's files).
    pub fn needs_no_config(&self) -> bool {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        match self {
            McpCommand::Serve(args) => {
                (args.url.is_some() || set("CHELA_RPC_URL"))
                    && (args.token_file.is_some() || set("CHELA_RPC_TOKEN"))
            }
        }
    }
}

/// The configuration a command that [needs none](McpCommand::needs_no_config) runs with
/// when the config cannot be loaded: the defaults.
pub fn without_config() -> LoadedConfig {
    LoadedConfig {
        config: chela::config::Config::default(),
        source: None,
        base_dir: PathBuf::from("."),
        notice: None,
    }
}

/// Runs `chela mcp COMMAND`.
pub async fn run(loaded: LoadedConfig, command: McpCommand) -> ExitCode {
    match command {
        McpCommand::Serve(args) => serve(loaded, args).await,
    }
}

/// Serves MCP on stdin/stdout until the client leaves.
async fn serve(loaded: LoadedConfig, args: ServeArgs) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let access = match ClientAccess::from_args(args.url, args.token_file.as_deref(), &env) {
        Ok(access) => access,
        Err(e) => {
            eprintln!("chela: {e}");
            return ExitCode::from(2);
        }
    };
    let server = tools::ChelaMcp::new(gateway::Gateway::new(loaded, access));
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(e) => {
            eprintln!("chela: the MCP client did not start a session: {e}");
            return ExitCode::FAILURE;
        }
    };
    match running.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chela: the MCP session ended with an error: {e}");
            ExitCode::FAILURE
        }
    }
}
