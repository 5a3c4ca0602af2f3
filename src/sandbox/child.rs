//! How hooks, coding-agent processes and the commands a coding agent runs through chela's
//! ACP terminal start. They need far more than `exec` (their own config and caches under
//! `$HOME`, node installs, the workspace, `/tmp`), so with `sandbox = "landlock"` they reach
//! everything this user can except chela's own files: the store folder, the RPC discovery
//! (token) file, the store's high-water file and the config file, hidden by the
//! `chela sandbox-exec --hide` trampoline (see [`super::hide`] for how, and its limits).

use std::ffi::OsString;
use std::path::PathBuf;

use super::landlock::{self, Rules};
use super::trampoline;
use crate::config::{Config, SandboxMode};

/// Environment variables as name and value.
pub type Vars = Vec<(String, String)>;

/// How these processes are started, decided once from the config.
#[derive(Debug, Clone, Default)]
pub struct ChildSandbox {
    mode: Mode,
    /// This binary, through which unconfined processes still start, to give up every
    /// privilege (`chela sandbox-exec --privileges-only`); `None` only when built by hand.
    privileges_only: Option<PathBuf>,
    /// With TCP confined, whether the process may still listen on its own sockets
    /// ([`Rules::listen`]).
    listen: bool,
}

#[derive(Debug, Clone, Default)]
enum Mode {
    /// Not confined: `sandbox = "off"` (or built by hand, as in unit tests).
    #[default]
    Off,
    /// Started through `trampoline sandbox-exec --hide ...`, TCP as `tcp` says (see
    /// [`Rules::tcp`]).
    Landlock {
        trampoline: PathBuf,
        hide: Vec<PathBuf>,
        tcp: Option<Vec<u16>>,
    },
    /// Landlock was asked for but cannot be had: the processes run unconfined.
    Unavailable(String),
}

/// Why a confined command cannot be built.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChildSandboxError {
    /// An environment variable name that `env(1)` would not take as one.
    #[error("bad environment variable name {0:?}")]
    BadEnvName(String),
    /// A program name with `=`, which `env(1)` would take as a variable.
    #[error("a program name with '=' cannot run under the sandbox: {0:?}")]
    ProgramWithEquals(String),
}

impl ChildSandbox {
    /// The sandbox `mode` asks for, hiding `config`'s files and allowing TCP as `tcp` says
    /// (see [`Rules::tcp`]), with this binary as trampoline.
    pub fn from_config(mode: SandboxMode, tcp: Option<Vec<u16>>, config: &Config) -> ChildSandbox {
        let exe = std::env::current_exe();
        let mode = match (mode, &exe) {
            (SandboxMode::Off, _) => Mode::Off,
            (SandboxMode::Landlock, Err(e)) => {
                Mode::Unavailable(format!("cannot find chela's own binary: {e}"))
            }
            (SandboxMode::Landlock, Ok(exe)) => match landlock::probe() {
                Err(e) => Mode::Unavailable(e.to_string()),
                Ok(()) => Mode::Landlock {
                    trampoline: exe.clone(),
                    hide: hidden(config),
                    tcp,
                },
            },
        };
        ChildSandbox {
            mode,
            privileges_only: exe.ok(),
            listen: false,
        }
    }

    /// [`ChildSandbox::from_config`] for the processes config key `key` (`[hooks] sandbox`)
    /// is about, with a log line saying what it is (a warning when they run unconfined
    /// although Landlock was asked for).
    pub fn announced(
        mode: SandboxMode,
        tcp: Option<Vec<u16>>,
        config: &Config,
        key: &str,
    ) -> ChildSandbox {
        let sandbox = ChildSandbox::from_config(mode, tcp, config);
        match sandbox.describe(key) {
            (true, line) => tracing::info!("{key}: {line}"),
            (false, line) => tracing::warn!("{key}: {line}"),
        }
        sandbox
    }

    /// Confined through `trampoline sandbox-exec`, hiding `hide`, TCP as `tcp` says (no
    /// kernel check).
    pub fn landlock(
        trampoline: PathBuf,
        hide: Vec<PathBuf>,
        tcp: Option<Vec<u16>>,
    ) -> ChildSandbox {
        ChildSandbox {
            mode: Mode::Landlock {
                trampoline: trampoline.clone(),
                hide,
                tcp,
            },
            privileges_only: Some(trampoline),
            listen: false,
        }
    }

    /// The same sandbox with TCP as `tcp` says (see [`Rules::tcp`]) and listening on the
    /// process's own sockets as `listen` says ([`Rules::listen`]) when it confines; an
    /// unconfined one stays as it is.
    pub fn with_network(mut self, tcp: Option<Vec<u16>>, listen: bool) -> ChildSandbox {
        if let Mode::Landlock { tcp: current, .. } = &mut self.mode {
            *current = tcp;
            self.listen = listen;
        }
        self
    }

    /// Program and arguments that run `argv` (program first), through the trampoline when
    /// confined. The process's own environment is set on the trampoline: only for variables
    /// from the config (the owner's), never for what a process asks for; see
    /// [`ChildSandbox::argv_with_env`].
    pub fn argv(&self, argv: &[OsString]) -> Vec<OsString> {
        match (&self.mode, &self.privileges_only) {
            (Mode::Off | Mode::Unavailable(_), None) => argv.to_vec(),
            (Mode::Off | Mode::Unavailable(_), Some(trampoline)) => {
                let mut out = vec![trampoline.clone().into_os_string()];
                out.extend(trampoline::args_privileges_only(argv));
                out
            }
            (
                Mode::Landlock {
                    trampoline,
                    hide,
                    tcp,
                },
                _,
            ) => {
                let rules = Rules {
                    hide: hide.clone(),
                    tcp: tcp.clone(),
                    listen: self.listen,
                    ..Rules::default()
                };
                let mut out = vec![trampoline.clone().into_os_string()];
                out.extend(trampoline::args_for(&rules, argv));
                out
            }
        }
    }

    /// [`ChildSandbox::argv`] for a command whose extra variables `env` come from an agent:
    /// when confined they are set inside the sandbox by `env(1)` (on the trampoline itself,
    /// `LD_PRELOAD` would run the agent's code before the sandbox applies). Returns the argv
    /// and the variables to set on the spawned process.
    pub fn argv_with_env(
        &self,
        argv: &[OsString],
        env: &[(String, String)],
    ) -> Result<(Vec<OsString>, Vars), ChildSandboxError> {
        if !self.through_trampoline() || env.is_empty() {
            return Ok((self.argv(argv), env.to_vec()));
        }
        if let Some((name, _)) = env.iter().find(|(name, _)| !super::exec::is_env_name(name)) {
            return Err(ChildSandboxError::BadEnvName(name.clone()));
        }
        if let Some(program) = argv.first().filter(|p| p.to_string_lossy().contains('=')) {
            return Err(ChildSandboxError::ProgramWithEquals(
                program.to_string_lossy().into_owned(),
            ));
        }
        let mut inside: Vec<OsString> = vec!["env".into()];
        inside.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
        inside.extend(argv.iter().cloned());
        Ok((self.argv(&inside), Vec::new()))
    }

    /// True when processes start through the trampoline (confined, or to drop privileges).
    fn through_trampoline(&self) -> bool {
        matches!(self.mode, Mode::Landlock { .. }) || self.privileges_only.is_some()
    }

    /// One line for logs and `chela doctor`; `true` when confined or off on purpose.
    pub fn describe(&self, key: &str) -> (bool, String) {
        match &self.mode {
            Mode::Off => (
                true,
                format!(
                    "off ({key} = \"off\"): they reach everything this user can (with no capabilities)"
                ),
            ),
            Mode::Landlock { hide, tcp, .. } => {
                let names: Vec<String> = hide.iter().map(|p| p.display().to_string()).collect();
                let (kernel_ok, network) = super::netguard::describe(tcp.as_deref());
                (
                    kernel_ok,
                    format!(
                        "landlock: everything this user can reach except {}; {network}",
                        names.join(", ")
                    ),
                )
            }
            Mode::Unavailable(why) => (
                false,
                format!(
                    "{why}; they run unconfined and can read chela's store, RPC token file and config (set {key} = \"off\" to say so on purpose)"
                ),
            ),
        }
    }
}

/// chela's own files, which these processes must not reach: the store folder, its RPC
/// discovery (token) file and high-water file, the transcripts `chela import` kept beside
/// it, and the config file in use.
pub fn hidden(config: &Config) -> Vec<PathBuf> {
    let store = &config.store.path;
    let mut paths = vec![store.clone(), crate::config::discovery_path_for(store)];
    paths.extend(crate::store::highwater_path_for(store));
    // What `chela import` kept beside the store: whole transcripts.
    paths.extend(store.parent().map(|folder| folder.join("imported")));
    paths.extend(config.config_file.iter().cloned());
    // Absolute, and also resolved through symlinks now, once: a confined process that later
    // points a symlink on the configured path elsewhere cannot move what the next spawn
    // hides away from chela's real files.
    let mut out = Vec::new();
    for path in paths {
        let absolute = std::path::absolute(&path).unwrap_or(path);
        let resolved = super::hide::real(&absolute);
        if resolved != absolute {
            out.push(resolved);
        }
        out.push(absolute);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn os(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn hidden_keeps_a_symlinked_store_at_its_target_as_resolved_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("disk/data")).unwrap();
        std::os::unix::fs::symlink(root.join("disk"), root.join("chela")).unwrap();
        let mut config = Config::default();
        config.store.path = root.join("chela/data");
        config.config_file = None;
        let got = hidden(&config);
        assert!(got.contains(&root.join("disk/data")), "{got:?}");
        assert!(got.contains(&root.join("chela/data")), "{got:?}");
    }

    #[test]
    fn hidden_names_the_store_its_side_files_and_the_config_file() {
        let mut config = Config::default();
        config.store.path = "/h/.chela/data".into();
        config.config_file = Some("/h/.config/chela/config.toml".into());
        let got: Vec<String> = hidden(&config)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            got,
            [
                "/h/.chela/data",
                "/h/.chela/data.rpc",
                "/h/.chela/data.highwater",
                "/h/.chela/imported",
                "/h/.config/chela/config.toml"
            ]
        );
    }

    #[test]
    fn confined_commands_go_through_the_trampoline_with_agent_variables_inside() {
        let sandbox =
            ChildSandbox::landlock("/bin/chela".into(), vec!["/h/data".into()], Some(vec![443]));
        let argv = sandbox.argv(&os(&["codex", "--acp"]));
        assert_eq!(
            argv,
            os(&[
                "/bin/chela",
                "sandbox-exec",
                "--hide",
                "/h/data",
                "--tcp",
                "--connect",
                "443",
                "--",
                "codex",
                "--acp"
            ])
        );
        let env = vec![("LD_PRELOAD".to_owned(), "./x.so".to_owned())];
        let (argv, outside) = sandbox.argv_with_env(&os(&["make"]), &env).unwrap();
        assert!(outside.is_empty());
        let after: Vec<_> = argv.iter().skip_while(|a| *a != "--").skip(1).collect();
        assert_eq!(after, ["env", "LD_PRELOAD=./x.so", "make"]);
        let bad = vec![("-u".to_owned(), "x".to_owned())];
        assert!(sandbox.argv_with_env(&os(&["make"]), &bad).is_err());
        assert!(sandbox.argv_with_env(&os(&["A=b"]), &env).is_err());
        // Off from the config: through the trampoline to drop privileges, the variables
        // inside.
        let config = Config::default();
        let off = ChildSandbox::from_config(SandboxMode::Off, None, &config);
        let (argv, outside) = off.argv_with_env(&os(&["make"]), &env).unwrap();
        assert!(outside.is_empty());
        assert_eq!(argv[1..4], os(&["sandbox-exec", "--privileges-only", "--"]));
        assert_eq!(argv[4..], os(&["env", "LD_PRELOAD=./x.so", "make"]));
        // Built by hand: unchanged, the variables on the process.
        let off = ChildSandbox::default();
        assert_eq!(off.argv(&os(&["codex"])), os(&["codex"]));
        assert_eq!(
            off.argv_with_env(&os(&["make"]), &env).unwrap(),
            (os(&["make"]), env)
        );
    }
}
