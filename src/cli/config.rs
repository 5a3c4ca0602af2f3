//! `chela config show|init` and `chela completions SHELL`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chela::config::{ENV_OVERRIDES, LoadedConfig};
use clap::Subcommand;

/// The commented example written by `chela config init` (every key with its default).
const EXAMPLE: &str = include_str!("../../config.example.toml");

/// What to do with the configuration.
#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration (secrets hidden) and the files in use.
    Show,
    /// Write the commented example config (every key with its default) to the config path:
    /// --config FILE, else $CHELA_CONFIG, else the platform config dir's chela/config.toml.
    /// An existing file is never overwritten.
    Init,
}

/// `chela config show`: the paths in use, the model as it will be reached, then the
/// effective configuration as TOML with tokens and keys shown as `<set>`.
pub fn show(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config;
    let mut out = String::new();
    let file = match &loaded.source {
        Some(path) => path.display().to_string(),
        None => "none (built-in defaults)".to_owned(),
    };
    let lines = [
        format!("config file: {file}"),
        format!("relative paths from: {}", loaded.base_dir.display()),
        format!("store: {}", config.store.describe()),
        format!(
            "RPC discovery file: {}",
            chela::config::discovery_path_for(&config.store.path).display()
        ),
        model_line(config),
    ];
    for line in lines.iter().chain(env_lines().iter()) {
        out.push_str(&format!("# {line}\n"));
    }
    match toml::to_string(&config.redacted()) {
        Ok(text) => out.push_str(&format!("\n{text}")),
        Err(e) => {
            eprintln!("chela: cannot print the configuration: {e}");
            return ExitCode::FAILURE;
        }
    }
    // `chela config show | head` closes the pipe early: not an error worth a panic.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    ExitCode::SUCCESS
}

/// The model as the gateway will reach it, environment included.
fn model_line(config: &chela::config::Config) -> String {
    let settings = chela::agent::provider_settings(config);
    let key = match settings.effective_api_key() {
        Some(_) => "<set>",
        None => "none",
    };
    match settings.kind {
        chela::config::ProviderKind::Echo => "model: echo (answers with your own text)".to_owned(),
        kind => format!(
            "model: {kind} {} at {} (API key {key})",
            settings.effective_model(),
            chela::config::redact::redact_url(&settings.effective_base_url(), false)
        ),
    }
}

/// The environment overrides in effect, one line each (values of secrets hidden).
fn env_lines() -> Vec<String> {
    let mut lines = Vec::new();
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    for (name, key) in ENV_OVERRIDES {
        if let Some(value) = set(name) {
            // A database URL may carry a password.
            let value = match *key {
                "store.url" => chela::config::redact::redact_url(&value, false),
                _ => value,
            };
            lines.push(format!("{key} from {name} = {value:?}"));
        }
    }
    let secrets = [
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "TELEGRAM_BOT_TOKEN",
        "DISCORD_BOT_TOKEN",
        "CHELA_RPC_TOKEN",
    ];
    for name in secrets {
        if set(name).is_some() {
            lines.push(format!("environment: {name} is set"));
        }
    }
    lines
}

/// `chela config init`: writes [`EXAMPLE`] to the config path, refusing to overwrite.
pub fn init(explicit: Option<&Path>) -> ExitCode {
    let Some(path) = target(explicit) else {
        eprintln!("chela: no config folder found; pass --config FILE");
        return ExitCode::from(2);
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("chela: cannot create {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path);
    let written = match file {
        Ok(mut file) => file.write_all(EXAMPLE.as_bytes()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "chela: {} already exists; not overwritten (edit it, or move it away first)",
                path.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => Err(e),
    };
    match written {
        Ok(()) => {
            println!(
                "wrote {} (every key with its default; change what you need)",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chela: cannot write {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

/// Where `config init` writes: `explicit`, else `$CHELA_CONFIG`, else the default path.
fn target(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("CHELA_CONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(chela::config::default_config_path)
}

/// `chela completions SHELL`: the completion script of `command` on stdout.
pub fn completions(shell: clap_complete::Shell, mut command: clap::Command) -> ExitCode {
    let name = command.get_name().to_owned();
    clap_complete::generate(shell, &mut command, name, &mut std::io::stdout());
    ExitCode::SUCCESS
}
