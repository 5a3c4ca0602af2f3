//! Command implementations for the `chela` binary.

pub mod acp;
pub mod agent;
pub mod allocator;
pub mod chat;
mod chat_rpc;
pub mod config;
pub mod cron;
pub mod doctor;
#[cfg(feature = "import-openclaw")]
pub mod import;
pub mod logfile;
pub mod mcp;
pub mod pairing;
pub mod panel;
pub mod platforms;
pub mod rpc;
mod screen;
pub mod serve;
pub mod sessions;
pub mod skills;
pub mod status;
pub mod store;

#[cfg(test)]
mod lean_tests;

use std::process::ExitCode;

use chela::config::LoadedConfig;
use chela::gateway::{Gateway, GatewayError};

/// What a command left out of this build says: its name and the cargo feature that builds
/// it. Exit status 2, as for a usage error.
#[cfg(not(feature = "import-openclaw"))]
pub fn not_built(command: &str, feature: &str) -> ExitCode {
    eprintln!(
        "chela: `{command}` is not in this build: build chela with the cargo feature `{feature}` (`--features {feature}`)"
    );
    ExitCode::from(2)
}

/// The log levels `-v` and `-q` step through.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The level `default_level` moved by `verbosity` steps (`-v` up, `-q` down).
pub fn log_level(default_level: &str, verbosity: i8) -> &'static str {
    let at = LEVELS.iter().position(|l| *l == default_level).unwrap_or(2) as i64;
    let moved = (at + i64::from(verbosity)).clamp(0, LEVELS.len() as i64 - 1);
    LEVELS[moved as usize]
}

/// The log file of `chela chat`: `<store.path>.log`, beside the store.
pub fn log_file(loaded: &LoadedConfig) -> std::path::PathBuf {
    let mut name = loaded.config.store.path.clone().into_os_string();
    name.push(".log");
    name.into()
}

/// Starts logging: at `default_level` moved by `verbosity` when that is not 0, else as
/// `RUST_LOG` says, else at `default_level`; to stderr, or appended to `file` (mode 0600;
/// stderr when it cannot be opened); and also to `[log] file` when `also` sets one (rotated
/// by size, [`logfile::RotatingFile`]).
pub fn init_logging(
    default_level: &str,
    verbosity: i8,
    file: Option<&std::path::Path>,
    also: Option<&chela::config::LogConfig>,
) {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let (main, ansi) = match file.map(|path| (path, open_log(path))) {
        Some((_, Ok(log))) => (BoxMakeWriter::new(std::sync::Mutex::new(log)), false),
        other => {
            if let Some((path, Err(e))) = other {
                eprintln!("chela: cannot open the log file {}: {e}", path.display());
            }
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            (BoxMakeWriter::new(std::io::stderr), ansi)
        }
    };
    let main = tracing_subscriber::fmt::layer()
        .with_writer(main)
        .with_ansi(ansi)
        .with_target(false);
    let extra = also.and_then(rotating_log).map(|log| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::sync::Mutex::new(log))
            .with_ansi(false)
            .with_target(false)
    });
    let _ = tracing_subscriber::registry()
        .with(log_filter(default_level, verbosity))
        .with(main)
        .with(extra)
        .try_init();
}

/// The filter of [`init_logging`].
fn log_filter(default_level: &str, verbosity: i8) -> tracing_subscriber::EnvFilter {
    let level = log_level(default_level, verbosity);
    // The ACP crate logs every refused agent request (a path escape...) as a warning;
    // chela reports those itself.
    let fallback =
        || tracing_subscriber::EnvFilter::new(format!("{level},agent_client_protocol=error"));
    if verbosity == 0 {
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| fallback())
    } else {
        fallback()
    }
}

/// The `[log] file` of `config`, opened; `None` when none is set or it cannot be opened
/// (said on stderr).
fn rotating_log(config: &chela::config::LogConfig) -> Option<logfile::RotatingFile> {
    let path = config.path()?;
    match logfile::RotatingFile::open(path, config.max_bytes(), config.keep) {
        Ok(log) => Some(log),
        Err(e) => {
            eprintln!("chela: cannot open the log file {}: {e}", path.display());
            None
        }
    }
}

/// Opens `path` for appending, made with mode 0600.
fn open_log(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // Before the first start, the folder the store goes in may not exist yet.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let file = options.open(path)?;
    // A file made earlier with looser rights is made private too.
    #[cfg(unix)]
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(file)
}

/// The terminal user's name: `terminal.user`, else `$USER`, else `local`.
pub fn terminal_user(loaded: &LoadedConfig) -> String {
    loaded.config.terminal.resolved_user()
}

/// Whether `chela gateway` runs the terminal as its channel, typed at by a person: no
/// platform token is set and stdin is a terminal. Its log then goes to the log file (as
/// `chela chat`'s), and Ctrl-D stops it.
pub fn terminal_gateway(loaded: &LoadedConfig) -> bool {
    platforms::configured(&loaded.config).next().is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stdin())
}

/// The platform channels whose token is set (none: the terminal is the channel), each built
/// by its entry of [`platforms::PLATFORMS`].
pub fn platform_channels(
    loaded: &LoadedConfig,
) -> Result<Vec<std::sync::Arc<dyn chela_channel::Channel>>, ExitCode> {
    let mut channels = Vec::new();
    for platform in platforms::configured(&loaded.config) {
        match (platform.build)(&loaded.config) {
            Ok(channel) => channels.push(channel),
            Err(e) => {
                eprintln!("chela: {e}");
                return Err(ExitCode::from(2));
            }
        }
    }
    Ok(channels)
}

/// Starts a gateway, turning start-up failures into a message and exit code 2.
pub async fn start(
    loaded: &LoadedConfig,
    channels: Vec<std::sync::Arc<dyn chela_channel::Channel>>,
) -> Result<Gateway, ExitCode> {
    Gateway::start(loaded.config.clone(), channels)
        .await
        .map_err(start_failed)
}

/// Prints why the gateway could not start; exit code 2.
pub fn start_failed(e: GatewayError) -> ExitCode {
    match &e {
        GatewayError::Provider(_) => eprintln!("chela: no usable model: {e}"),
        _ => eprintln!("chela: {e}"),
    }
    ExitCode::from(2)
}

/// Starts the RPC of a gateway that `chela gateway` or `chela chat` runs; on failure the
/// gateway is shut down again and the exit code is 2.
pub async fn serve_rpc(gateway: &Gateway) -> Result<(), ExitCode> {
    match gateway.serve_rpc().await {
        Ok(_) => Ok(()),
        Err(e) => {
            gateway.shutdown().await;
            Err(start_failed(e))
        }
    }
}
