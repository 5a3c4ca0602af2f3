//! How `exec` (foreground, PTY and background) starts a model's command: the scrubbed
//! environment with `[tools.exec] pass_env`, and with `sandbox = "landlock"` through the
//! `chela sandbox-exec` trampoline under [`Rules`] that keep chela's store, config, RPC token
//! file and home folder out of reach.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::landlock::{self, DEVICES, Rules, SYSTEM_READ};
use super::trampoline;
use crate::config::{Config, SandboxMode};

/// How commands are started, decided once from the config.
#[derive(Debug, Clone, Default)]
pub struct ExecSandbox {
    pass_env: Vec<String>,
    mode: Mode,
    /// This binary, through which unconfined commands still start, to give up every
    /// privilege (`chela sandbox-exec --privileges-only`); `None` only when built by hand.
    privileges_only: Option<PathBuf>,
}

#[derive(Debug, Clone, Default)]
enum Mode {
    /// Not confined: `sandbox = "off"` (or a context built by hand, as in unit tests).
    #[default]
    Off,
    /// Confined by `trampoline sandbox-exec` under `rules`; TMPDIR is `temp`.
    Landlock {
        trampoline: PathBuf,
        rules: Rules,
        temp: Option<PathBuf>,
    },
    /// Landlock was asked for but the kernel lacks it: commands run unconfined, each after
    /// the owner's approval.
    Unavailable(String),
    /// Landlock cannot protect what it must as configured: exec refuses to run.
    Refused(String),
}

/// Why exec will not start a command (the text is what the model reads).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecRefusal {
    /// A variable name of the model's `env` is not `[A-Za-z_][A-Za-z0-9_]*`.
    #[error("bad environment variable name {0:?}")]
    BadEnvName(String),
    /// The sandbox refuses every command (the reason says why).
    #[error("exec is refused: {0}")]
    Refused(String),
}

impl ExecSandbox {
    /// The sandbox `config` asks for, with this binary as the trampoline.
    pub fn from_config(config: &Config) -> ExecSandbox {
        match std::env::current_exe() {
            Ok(exe) => ExecSandbox::with_trampoline(config, exe),
            Err(e) => ExecSandbox {
                pass_env: config.tools.exec.pass_env.clone(),
                mode: Mode::Refused(format!("cannot find chela's own binary: {e}")),
                privileges_only: None,
            },
        }
    }

    /// The sandbox `config` asks for, confining through `trampoline sandbox-exec`.
    pub fn with_trampoline(config: &Config, trampoline: PathBuf) -> ExecSandbox {
        let exec = &config.tools.exec;
        let mode = match exec.sandbox {
            SandboxMode::Off => Mode::Off,
            SandboxMode::Landlock => match landlock::probe() {
                Err(e) => Mode::Unavailable(e.to_string()),
                Ok(()) => landlock_mode(config, trampoline.clone()),
            },
        };
        ExecSandbox {
            pass_env: exec.pass_env.clone(),
            mode,
            privileges_only: Some(trampoline),
        }
    }

    /// True when every command needs the owner's approval (Landlock wanted but missing).
    pub fn needs_approval(&self) -> bool {
        matches!(self.mode, Mode::Unavailable(_))
    }

    /// True when exec refuses every command (the sandbox cannot protect what it must).
    pub fn refuses(&self) -> bool {
        matches!(self.mode, Mode::Refused(_))
    }

    /// Program and arguments that run `sh -c command` with the extra variables `env` (the
    /// model's), or why exec refuses to. Under Landlock the variables are not set on the
    /// trampoline (`LD_PRELOAD` there would run before the sandbox is applied): `env(1)` sets
    /// them inside the sandbox; see [`ExecSandbox::process_env`].
    pub fn argv(
        &self,
        command: &str,
        env: &[(String, String)],
    ) -> Result<Vec<OsString>, ExecRefusal> {
        if let Some((name, _)) = env.iter().find(|(name, _)| !is_env_name(name)) {
            return Err(ExecRefusal::BadEnvName(name.clone()));
        }
        let shell: Vec<OsString> = vec!["sh".into(), "-c".into(), command.into()];
        let mut inside: Vec<OsString> = Vec::new();
        if !env.is_empty() {
            inside.push("env".into());
            inside.extend(env.iter().map(|(k, v)| OsString::from(format!("{k}={v}"))));
        }
        inside.extend(shell.iter().cloned());
        match (&self.mode, &self.privileges_only) {
            (Mode::Off | Mode::Unavailable(_), None) => Ok(shell),
            (Mode::Off | Mode::Unavailable(_), Some(trampoline)) => {
                let mut argv = vec![trampoline.clone().into_os_string()];
                argv.extend(trampoline::args_privileges_only(&inside));
                Ok(argv)
            }
            (
                Mode::Landlock {
                    trampoline, rules, ..
                },
                _,
            ) => {
                let mut argv = vec![trampoline.clone().into_os_string()];
                argv.extend(trampoline::args_for(rules, &inside));
                Ok(argv)
            }
            (Mode::Refused(why), _) => Err(ExecRefusal::Refused(why.clone())),
        }
    }

    /// The extra variables to set on the spawned process itself: `env` when the command
    /// starts directly, none through the trampoline (they travel in [`ExecSandbox::argv`],
    /// set by `env(1)` once the privileges are gone: `LD_PRELOAD` on the trampoline would
    /// run the model's code before).
    pub fn process_env<'a>(&self, env: &'a [(String, String)]) -> &'a [(String, String)] {
        match (&self.mode, &self.privileges_only) {
            (Mode::Landlock { .. }, _) | (_, Some(_)) => &[],
            _ => env,
        }
    }

    /// The environment commands start from.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = super::env::scrubbed(&self.pass_env);
        if let Mode::Landlock {
            temp: Some(temp), ..
        } = &self.mode
        {
            env.retain(|(name, _)| name != "TMPDIR");
            env.push(("TMPDIR".into(), temp.clone().into_os_string()));
        }
        env
    }

    /// One line for logs and `chela doctor`; `true` when exec is confined or off on purpose.
    pub fn describe(&self) -> (bool, String) {
        match &self.mode {
            Mode::Off => (
                true,
                "off ([tools.exec] sandbox = \"off\"): commands reach everything this user can (with no capabilities)"
                    .to_owned(),
            ),
            Mode::Landlock { rules, .. } => {
                let (kernel_ok, network) = super::netguard::describe(rules.tcp.as_deref());
                (
                    kernel_ok,
                    format!(
                        "landlock: commands write only to {}; {network}",
                        join(&rules.write)
                    ),
                )
            }
            Mode::Unavailable(why) => (
                false,
                format!(
                    "{why}; exec asks the owner for approval before each command (set [tools.exec] sandbox = \"off\" to run commands unconfined without asking)"
                ),
            ),
            Mode::Refused(why) => (false, format!("exec is refused: {why}")),
        }
    }
}

fn join(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

/// The Landlock mode of `config`, or `Refused` when an allowed folder holds something that
/// must stay out of reach.
fn landlock_mode(config: &Config, trampoline: PathBuf) -> Mode {
    let exec = &config.tools.exec;
    let workspace = config.agent.workspace.clone();
    let temp = temp_folder();
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    read.push(workspace.clone());
    read.extend(exec.allow_read.iter().cloned());
    let mut write = vec![workspace];
    write.extend(temp.iter().cloned());
    write.extend(exec.allow_write.iter().cloned());
    let rules = Rules {
        read,
        write,
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        hide: Vec::new(),
        tcp: exec.network.connect_ports(&exec.allow_ports),
        listen: false,
    };
    match exposed(&rules, &protected(config)) {
        Some(why) => Mode::Refused(why),
        None => Mode::Landlock {
            trampoline,
            rules,
            temp,
        },
    }
}

/// What a sandboxed command must never reach: the store, the RPC discovery (token) file, the
/// config file's folder and the home folder.
fn protected(config: &Config) -> Vec<PathBuf> {
    let store = &config.store.path;
    let mut paths = vec![store.clone(), crate::config::discovery_path_for(store)];
    paths.extend(config.base_dir.iter().cloned());
    paths.extend(dirs::home_dir());
    paths
}

/// Names the first protected path that lies beneath an allowed folder.
fn exposed(rules: &Rules, protected: &[PathBuf]) -> Option<String> {
    for secret in protected {
        let secret_real = real(secret);
        for root in rules.roots() {
            if secret_real.starts_with(real(root)) {
                return Some(format!(
                    "{} is inside {}, which the sandbox opens to commands; move the workspace (or that folder) elsewhere",
                    secret.display(),
                    root.display()
                ));
            }
        }
    }
    None
}

/// `path` with symlinks resolved as far as it exists.
fn real(path: &Path) -> PathBuf {
    if let Ok(resolved) = path.canonicalize() {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// Whether `name` is a plain environment variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub(super) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A temp folder for commands, this user's only; `None` when it cannot be made.
fn temp_folder() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // The owner of /proc/self is this process's user.
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok()?;
    let dir = std::env::temp_dir().join(format!("chela-exec-{uid}"));
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir);
    // Not followed: a link planted by another user must not become a writable folder.
    let ours = std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
    match made {
        Ok(()) if ours => Some(dir),
        _ => {
            tracing::warn!(path = %dir.display(), "exec sandbox: cannot make the temp folder; commands get none");
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_holding_the_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let rules = Rules {
            write: vec![dir.path().to_path_buf()],
            ..Rules::default()
        };
        let why = exposed(&rules, &[dir.path().join("data")]).unwrap();
        assert!(why.contains("data"), "{why}");
        let rules = Rules {
            write: vec![dir.path().join("ws")],
            ..Rules::default()
        };
        assert_eq!(exposed(&rules, &[dir.path().join("data")]), None);
        assert_eq!(exposed(&rules, &[dir.path().to_path_buf()]), None);
    }

    #[test]
    fn off_runs_sh_directly_and_scrubs_the_environment() {
        let sandbox = ExecSandbox::default();
        assert_eq!(sandbox.argv("true", &[]).unwrap(), ["sh", "-c", "true"]);
        assert!(!sandbox.needs_approval());
        assert!(
            sandbox
                .env()
                .iter()
                .all(|(name, _)| super::super::env::is_allowed(&name.to_string_lossy()))
        );
    }

    #[test]
    fn under_landlock_the_models_variables_are_set_inside_the_sandbox_only() {
        let sandbox = ExecSandbox {
            pass_env: Vec::new(),
            mode: Mode::Landlock {
                trampoline: "/bin/chela".into(),
                rules: Rules::default(),
                temp: None,
            },
            privileges_only: Some("/bin/chela".into()),
        };
        let env = vec![("LD_PRELOAD".to_owned(), "./x.so".to_owned())];
        // Nothing for the trampoline process itself: the loader would act on it unconfined.
        assert!(sandbox.process_env(&env).is_empty());
        let argv = sandbox.argv("true", &env).unwrap();
        let after: Vec<_> = argv.iter().skip_while(|a| *a != "--").skip(1).collect();
        assert_eq!(after, ["env", "LD_PRELOAD=./x.so", "sh", "-c", "true"]);
        let off = ExecSandbox::default();
        assert_eq!(off.process_env(&env), env.as_slice());
        let bad = vec![("-u".to_owned(), "x".to_owned())];
        assert!(sandbox.argv("true", &bad).is_err());
        assert!(off.argv("true", &bad).is_err());
    }

    #[test]
    fn off_from_the_config_still_starts_through_the_trampoline_to_drop_privileges() {
        let mut config = Config::default();
        config.tools.exec.sandbox = SandboxMode::Off;
        let sandbox = ExecSandbox::with_trampoline(&config, "/bin/chela".into());
        let env = vec![("LD_PRELOAD".to_owned(), "./x.so".to_owned())];
        assert!(sandbox.process_env(&env).is_empty());
        assert_eq!(
            sandbox.argv("true", &env).unwrap(),
            [
                "/bin/chela",
                "sandbox-exec",
                "--privileges-only",
                "--",
                "env",
                "LD_PRELOAD=./x.so",
                "sh",
                "-c",
                "true"
            ]
        );
    }
}
