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
    Show {
        /// Only the keys whose values differ from the built-in defaults (the config file's
        /// and the environment's doing).
        #[arg(long)]
        changed: bool,
    },
    /// Write the commented example config (every key with its default) to the config path:
    /// --config FILE, else $CHELA_CONFIG, else the platform config dir's chela/config.toml.
    /// An existing file is never overwritten.
    Init,
}

/// `chela config show`: the paths in use, the model as it will be reached, then the
/// effective configuration as TOML with tokens and keys shown as `<set>`.
pub fn show(loaded: &LoadedConfig, changed: bool) -> ExitCode {
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
    ];
    let lines = lines
        .into_iter()
        .chain(model_lines(config))
        .chain(env_lines());
    for line in lines {
        out.push_str(&format!("# {line}\n"));
    }
    let shown = match changed {
        true => changed_keys(loaded),
        false => table_of(&config.redacted()),
    };
    match shown.and_then(|table| toml::to_string(&table)) {
        Ok(text) if text.is_empty() => out.push_str("\n# (every key has its default)\n"),
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

/// The keys of the effective configuration (secrets hidden) whose values differ from the
/// built-in defaults, with the defaults' paths resolved as the loaded ones were.
fn changed_keys(loaded: &LoadedConfig) -> Result<toml::Table, toml::ser::Error> {
    let mut defaults = chela::config::Config::default();
    defaults.resolve_paths(&loaded.base_dir, dirs::home_dir().as_deref());
    let current = table_of(&loaded.config.redacted())?;
    let defaults = table_of(&defaults.redacted())?;
    Ok(differing(current, &defaults))
}

/// `config` as a TOML table.
fn table_of(config: &chela::config::Config) -> Result<toml::Table, toml::ser::Error> {
    match toml::Value::try_from(config)? {
        toml::Value::Table(table) => Ok(table),
        _ => Ok(toml::Table::new()),
    }
}

/// What of `current` differs from `defaults`: tables compared key by key, any other value
/// (arrays included) whole.
fn differing(current: toml::Table, defaults: &toml::Table) -> toml::Table {
    let mut out = toml::Table::new();
    for (key, value) in current {
        match (value, defaults.get(&key)) {
            (toml::Value::Table(table), Some(toml::Value::Table(default))) => {
                let inner = differing(table, default);
                if !inner.is_empty() {
                    out.insert(key, toml::Value::Table(inner));
                }
            }
            (value, Some(default)) if &value == default => {}
            (value, _) => {
                out.insert(key, value);
            }
        }
    }
    out
}

/// The models as the gateway will reach them (its own, then each fallback), environment
/// included.
fn model_lines(config: &chela::config::Config) -> Vec<String> {
    let targets = match chela::agent::model_targets(config) {
        Ok(targets) => targets,
        Err(e) => return vec![format!("model: cannot be set up: {e}")],
    };
    let line = |(i, (target, settings)): (
        usize,
        &(
            chela::agent::provider::route::Target,
            chela::agent::provider::ProviderSettings,
        ),
    )| {
        let what = if i == 0 { "model" } else { "fallback" };
        let key = match settings.effective_api_key() {
            Some(_) => "<set>",
            None => "none",
        };
        match settings.kind {
            chela::config::ProviderKind::Echo => {
                format!("{what}: {target} (echo: answers with your own text)")
            }
            kind => format!(
                "{what}: {target}, {kind} at {} (API key {key})",
                chela::config::redact::redact_url(&settings.effective_base_url(), false)
            ),
        }
    };
    targets.iter().enumerate().map(line).collect()
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
        "CHELA_RPC_TOKEN",
    ]
    .into_iter()
    .chain(chela::config::TOKEN_VARIABLES);
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

/// `chela completions SHELL`: the completion script of `command` on stdout. A reader that
/// stops early (`| head -1`) ends it quietly, as for any Unix filter.
pub fn completions(shell: clap_complete::Shell, mut command: clap::Command) -> ExitCode {
    let name = command.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, name, &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chela completions: cannot write the script: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::differing;

    #[test]
    fn only_values_that_differ_are_kept_tables_compared_key_by_key() {
        let current: toml::Table =
            toml::from_str("a = 1\nb = [1, 2]\n[t]\nx = \"same\"\ny = 2\n[u]\nz = 0\n").unwrap();
        let defaults: toml::Table =
            toml::from_str("a = 1\nb = [1]\n[t]\nx = \"same\"\ny = 1\n[u]\nz = 0\n").unwrap();
        let changed = toml::to_string(&differing(current, &defaults)).unwrap();
        assert_eq!(changed, "b = [1, 2]\n\n[t]\ny = 2\n");
    }
}
