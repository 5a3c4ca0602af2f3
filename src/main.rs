//! The `chela` command line: gateway, chat, agent, sessions, pairing, cron, status, doctor,
//! config, completions.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// chela: a chat-platform gateway for AI agents.
#[derive(Parser)]
#[command(name = "chela", version, about)]
struct Args {
    /// Config file (default: $CHELA_CONFIG, else the platform config dir's chela/config.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Open the store even if it lost writes it once made durable (damaged or restored
    /// files); messages older than the last recorded write are then not answered again.
    #[arg(long, global = true)]
    accept_store_rollback: bool,
    /// More log output: -v info, -vv debug, -vvv trace (`chat` then logs to stderr, not to
    /// its log file).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Less log output: -q errors only, -qq none.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "verbose")]
    quiet: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway with every configured channel (the terminal when no platform is set).
    Gateway,
    /// Chat with the agent in this terminal (logs go to <store.path>.log unless -v).
    Chat(cli::chat::ChatOptions),
    /// Run one turn and print the reply (for scripts).
    Agent {
        /// The message to send.
        #[arg(long, short)]
        message: String,
        /// Session key (default: this terminal user's DM session).
        #[arg(long)]
        session: Option<String>,
        /// Print a JSON object instead of streaming text.
        #[arg(long)]
        json: bool,
    },
    /// Inspect and move transcripts.
    Sessions {
        #[command(subcommand)]
        command: cli::sessions::SessionsCommand,
    },
    /// Move over from another gateway: `chela import openclaw [DIR]`.
    #[cfg(feature = "import-openclaw")]
    Import {
        #[command(subcommand)]
        command: cli::import::ImportCommand,
    },
    /// Move over from another gateway (not in this build: cargo feature `import-openclaw`).
    #[cfg(not(feature = "import-openclaw"))]
    Import {
        /// Whatever was given; the command only says it is not built.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    /// Approve or reject people who asked to message the bot directly.
    Pairing {
        #[command(subcommand)]
        command: cli::pairing::PairingCommand,
    },
    /// Scheduled jobs: list, add, remove, run now (through the running gateway, else on the
    /// store).
    Cron {
        #[command(subcommand)]
        command: cli::cron::CronCommand,
    },
    /// Skills: list what is found and whether it is loaded.
    Skills {
        #[command(subcommand)]
        command: cli::skills::SkillsCommand,
    },
    /// Coding agents reached over ACP.
    Acp {
        #[command(subcommand)]
        command: cli::acp::AcpCommand,
    },
    /// MCP: `chela mcp serve` lets MCP clients (Claude Code, Codex, ...) list the running
    /// gateway's sessions, read one's last messages and post a text into one's chat.
    Mcp {
        #[command(subcommand)]
        command: cli::mcp::McpCommand,
    },
    /// Show store state: sessions, pending turns, undelivered and dead-lettered replies.
    Status,
    /// Print the running gateway's control panel URL and how to log in.
    Panel,
    /// The store itself: move a sled store to redb.
    Store {
        #[command(subcommand)]
        command: cli::store::StoreCommand,
    },
    /// Check config, store and model provider, and say what to fix.
    Doctor,
    /// Show the effective configuration, or write the commented example.
    Config {
        #[command(subcommand)]
        command: cli::config::ConfigCommand,
    },
    /// Print a shell completion script, e.g.
    /// `chela completions bash > ~/.local/share/bash-completion/completions/chela`.
    Completions {
        /// bash, elvish, fish, powershell or zsh.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    // The exec sandbox's trampoline: nothing else may run first (one thread, no config).
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw
        .first()
        .is_some_and(|a| a == chela::sandbox::trampoline::SUBCOMMAND)
    {
        return chela::sandbox::trampoline::main(&raw[1..]);
    }
    chela::sandbox::signals::let_children_take_interrupts();
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // These work without a config (or with a broken one).
    match &args.command {
        Command::Completions { shell } => {
            return cli::config::completions(*shell, Args::command());
        }
        Command::Config {
            command: cli::config::ConfigCommand::Init,
        } => return cli::config::init(args.config.as_deref()),
        _ => {}
    }
    let loaded = match chela::config::Config::load(args.config.as_deref()) {
        Ok(mut loaded) => {
            loaded.config.store.accept_rollback = args.accept_store_rollback;
            loaded
        }
        Err(e) => match &args.command {
            Command::Mcp { command } if command.needs_no_config() => {
                eprintln!("chela: {e}; going on with the RPC address and token given");
                cli::mcp::without_config()
            }
            _ => {
                eprintln!("chela: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let default_log = match args.command {
        Command::Gateway => "info",
        _ => "warn",
    };
    let verbosity = i8::try_from(i16::from(args.verbose) - i16::from(args.quiet)).unwrap_or(0);
    // Log lines would tear the chat apart: they go to a file unless asked for with -v.
    let log_file = match args.command {
        Command::Chat(_) if args.verbose == 0 => Some(cli::log_file(&loaded)),
        Command::Gateway if args.verbose == 0 && cli::terminal_gateway(&loaded) => {
            Some(cli::log_file(&loaded))
        }
        _ => None,
    };
    // `chela gateway` also logs to `[log] file`, when set.
    let also = matches!(args.command, Command::Gateway).then_some(&loaded.config.log);
    cli::init_logging(default_log, verbosity, log_file.as_deref(), also);
    if matches!(args.command, Command::Gateway | Command::Chat(_)) {
        cli::allocator::give_back_idle_memory();
    }
    if let Some(notice) = &loaded.notice {
        eprintln!("chela: {notice}");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chela: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        match args.command {
            Command::Gateway => cli::serve::gateway(loaded).await,
            Command::Chat(options) => cli::chat::chat(loaded, options).await,
            Command::Agent {
                message,
                session,
                json,
            } => cli::agent::agent(loaded, message, session, json).await,
            Command::Sessions { command } => cli::sessions::run(loaded, command).await,
            #[cfg(feature = "import-openclaw")]
            Command::Import { command } => {
                cli::import::run(loaded, args.config.as_deref(), command).await
            }
            #[cfg(not(feature = "import-openclaw"))]
            Command::Import { .. } => cli::not_built("chela import", "import-openclaw"),
            Command::Store { command } => cli::store::run(loaded, command),
            Command::Pairing { command } => cli::pairing::run(loaded, command).await,
            Command::Cron { command } => cli::cron::run(loaded, command).await,
            Command::Skills { command } => cli::skills::run(loaded, command).await,
            Command::Acp { command } => cli::acp::run(loaded, command).await,
            Command::Mcp { command } => cli::mcp::run(loaded, command).await,
            Command::Status => cli::status::status(loaded).await,
            Command::Panel => cli::panel::panel(&loaded),
            Command::Doctor => cli::doctor::doctor(loaded).await,
            Command::Config {
                command: cli::config::ConfigCommand::Show { changed },
            } => cli::config::show(&loaded, changed),
            Command::Config { .. } => ExitCode::SUCCESS,
            Command::Completions { .. } => ExitCode::SUCCESS,
        }
    });
    // The terminal's stdin reader is a blocking thread that no one can interrupt: do not
    // wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}
