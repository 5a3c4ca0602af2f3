//! Checking a skill's requirements (binaries on `PATH`, environment variables, chela config
//! keys, OS) against a [`Probe`], so tests never touch the process environment.

use std::ffi::OsString;
use std::path::Path;

use crate::agent::skills::parse::Requires;

/// What requirements are checked against.
pub struct Probe<'a> {
    /// The `PATH` binaries are looked up in.
    pub path: Option<OsString>,
    /// Reads an environment variable.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The loaded chela config as a JSON value (`serde_json::to_value(&config)`).
    pub config: &'a serde_json::Value,
    /// The operating system, as in `std::env::consts::OS`.
    pub os: &'a str,
}

impl Probe<'_> {
    /// Whether an executable `name` is in a `PATH` folder (or, with a `/`, at that path).
    pub fn has_binary(&self, name: &str) -> bool {
        if name.contains('/') {
            return is_executable(Path::new(name));
        }
        let Some(path) = &self.path else {
            return false;
        };
        std::env::split_paths(path).any(|dir| {
            let candidate = dir.join(name);
            is_executable(&candidate)
                || (cfg!(windows)
                    && ["exe", "cmd", "bat"]
                        .iter()
                        .any(|ext| is_executable(&candidate.with_extension(ext))))
        })
    }

    /// Whether the environment variable `name` is set and not blank.
    pub fn has_env(&self, name: &str) -> bool {
        (self.env)(name).is_some_and(|v| !v.trim().is_empty())
    }

    /// Whether the dotted config key `key` is set: present and not null, false, 0, blank or
    /// empty.
    pub fn has_config(&self, key: &str) -> bool {
        let mut value = self.config;
        for part in key.split('.') {
            match value.get(part) {
                Some(v) => value = v,
                None => return false,
            }
        }
        match value {
            serde_json::Value::Null => false,
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
            serde_json::Value::String(s) => !s.trim().is_empty(),
            serde_json::Value::Array(a) => !a.is_empty(),
            serde_json::Value::Object(o) => !o.is_empty(),
        }
    }
}

/// Why `requires` does not hold (empty when it does), e.g. `missing binary: gh`.
pub fn unmet(requires: &Requires, probe: &Probe<'_>) -> Vec<String> {
    let mut reasons = Vec::new();
    if !requires.os.is_empty() && !requires.os.iter().any(|os| os == probe.os) {
        reasons.push(format!("os {} only", requires.os.join(", ")));
    }
    for bin in requires.bins.iter().filter(|b| !probe.has_binary(b)) {
        reasons.push(format!("missing binary: {bin}"));
    }
    for name in requires.env.iter().filter(|n| !probe.has_env(n)) {
        reasons.push(format!("env {name} not set"));
    }
    for key in requires.config.iter().filter(|k| !probe.has_config(k)) {
        reasons.push(format!("config {key} not set"));
    }
    reasons
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requires(bins: &[&str], env: &[&str], config: &[&str], os: &[&str]) -> Requires {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Requires {
            bins: owned(bins),
            env: owned(env),
            config: owned(config),
            os: owned(os),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[cfg(unix)]
    fn executable(dir: &Path, name: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn binaries_are_looked_up_in_the_given_path() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        executable(a.path(), "tool-a", 0o755);
        executable(b.path(), "tool-b", 0o755);
        executable(b.path(), "not-exec", 0o644);
        std::fs::create_dir(b.path().join("a-dir")).unwrap();
        let config = serde_json::Value::Null;
        let probe = Probe {
            path: std::env::join_paths([a.path(), b.path()]).ok(),
            env: &no_env,
            config: &config,
            os: "linux",
        };
        let r = requires(
            &["tool-a", "tool-b", "not-exec", "a-dir", "gh"],
            &[],
            &[],
            &[],
        );
        assert_eq!(
            unmet(&r, &probe),
            [
                "missing binary: not-exec",
                "missing binary: a-dir",
                "missing binary: gh"
            ]
        );
        let absolute = a.path().join("tool-a").display().to_string();
        assert!(probe.has_binary(&absolute));
        let no_path = Probe {
            path: None,
            ..probe
        };
        assert!(!no_path.has_binary("tool-a"));
    }

    #[test]
    fn env_must_be_set_and_not_blank() {
        let env = |name: &str| match name {
            "SET" => Some("x".to_string()),
            "BLANK" => Some("  ".to_string()),
            _ => None,
        };
        let config = serde_json::Value::Null;
        let probe = Probe {
            path: None,
            env: &env,
            config: &config,
            os: "linux",
        };
        let r = requires(&[], &["SET", "BLANK", "GITHUB_TOKEN"], &[], &[]);
        assert_eq!(
            unmet(&r, &probe),
            ["env BLANK not set", "env GITHUB_TOKEN not set"]
        );
    }

    #[test]
    fn config_keys_must_be_truthy() {
        let mut config = crate::config::Config::default();
        config.channels.discord.token = "abc".into();
        config.agent.skills_dirs = vec!["/x".into()];
        let value = serde_json::to_value(&config).unwrap();
        let probe = Probe {
            path: None,
            env: &no_env,
            config: &value,
            os: "linux",
        };
        let set = [
            "channels.discord.token",
            "agent.skills_dirs",
            "agent.timeout_s",
            "channels.telegram.require_mention",
            "model",
        ];
        assert_eq!(
            unmet(&requires(&[], &[], &set, &[]), &probe),
            [] as [&str; 0]
        );
        let unset = [
            "channels.telegram.token",
            "agent.max_concurrent_runs",
            "session.identity_links",
            "agent.no_such_key",
            "channels.telegram.token.deeper",
        ];
        assert_eq!(
            unmet(&requires(&[], &[], &unset, &[]), &probe),
            unset.map(|k| format!("config {k} not set"))
        );
    }

    #[test]
    fn os_must_be_listed() {
        let config = serde_json::Value::Null;
        let probe = Probe {
            path: None,
            env: &no_env,
            config: &config,
            os: "linux",
        };
        assert!(unmet(&requires(&[], &[], &[], &["linux", "macos"]), &probe).is_empty());
        assert!(unmet(&requires(&[], &[], &[], &[]), &probe).is_empty());
        assert_eq!(
            unmet(&requires(&[], &[], &[], &["windows"]), &probe),
            ["os windows only"]
        );
        assert_eq!(
            unmet(&requires(&[], &[], &[], &["macos", "windows"]), &probe),
            ["os macos, windows only"]
        );
    }
}
