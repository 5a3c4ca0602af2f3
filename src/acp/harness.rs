//! The harness registry (SPEC 4): built-in and configured coding agents, and whether each is
//! installed on this machine (`chela acp agents`, `chela doctor`).

use std::path::{Path, PathBuf};

use super::AcpError;
use crate::config::{AcpConfig, HarnessConfig};

/// Whether a harness can start here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// Its program was found at this path.
    Found(PathBuf),
    /// It runs through `npx`, which fetches the package on first use.
    ViaNpx(PathBuf),
    /// Its program is not on `PATH`.
    Missing(String),
}

impl Installed {
    /// True when it can start.
    pub fn is_usable(&self) -> bool {
        !matches!(self, Installed::Missing(_))
    }
}

impl std::fmt::Display for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Installed::Found(path) => write!(f, "installed ({})", path.display()),
            Installed::ViaNpx(path) => {
                write!(
                    f,
                    "via npx ({}; fetches the package on first use)",
                    path.display()
                )
            }
            Installed::Missing(program) => write!(f, "not installed ({program} is not on PATH)"),
        }
    }
}

/// The harness named `name`.
pub fn resolve(config: &AcpConfig, name: &str) -> Result<HarnessConfig, AcpError> {
    config
        .harnesses()
        .remove(name)
        .ok_or_else(|| AcpError::UnknownHarness(name.to_owned()))
}

/// Whether `harness` can start, looking its program up on `path_var` (the `PATH` value).
pub fn installed(harness: &HarnessConfig, path_var: Option<&str>) -> Installed {
    let Some(program) = harness.command.first() else {
        return Installed::Missing(String::new());
    };
    match find_program(program, path_var) {
        Some(path) if Path::new(program).file_name().is_some_and(|n| n == "npx") => {
            Installed::ViaNpx(path)
        }
        Some(path) => Installed::Found(path),
        None => Installed::Missing(program.clone()),
    }
}

/// `program` itself when it has a slash, else the first executable of that name on the path.
fn find_program(program: &str, path_var: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn harness(command: &[&str]) -> HarnessConfig {
        HarnessConfig {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            ..HarnessConfig::default()
        }
    }

    #[test]
    fn programs_are_found_on_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("my-agent");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let path = dir.path().to_str().unwrap();
        assert_eq!(
            installed(&harness(&["my-agent"]), Some(path)),
            Installed::Found(bin.clone())
        );
        assert!(matches!(
            installed(&harness(&["other"]), Some(path)),
            Installed::Missing(p) if p == "other"
        ));
        assert_eq!(
            installed(&harness(&[bin.to_str().unwrap()]), None),
            Installed::Found(bin)
        );
    }

    #[test]
    fn configured_harnesses_add_to_the_builtins() {
        let mut config = AcpConfig::default();
        config.agents.insert("mine".into(), harness(&["mine-acp"]));
        config
            .agents
            .insert("codex".into(), harness(&["codex-acp"]));
        assert_eq!(resolve(&config, "mine").unwrap().command, ["mine-acp"]);
        assert_eq!(resolve(&config, "codex").unwrap().command, ["codex-acp"]);
        assert_eq!(resolve(&config, "claude").unwrap().command[0], "npx");
        assert!(matches!(
            resolve(&config, "nope"),
            Err(AcpError::UnknownHarness(_))
        ));
    }
}
