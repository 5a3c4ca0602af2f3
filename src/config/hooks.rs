//! `[hooks]`: commands run before and after each tool call and around each run.

use serde::{Deserialize, Serialize};

/// `[[hooks.before_tool]]` and the like: one command and where it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HookConfig {
    /// Program and arguments (no shell). A program with a `/` in a relative path is resolved
    /// against the config file's folder; a bare name is looked up on `PATH`.
    pub command: Vec<String>,
    /// Tool names the hook applies to; empty: every tool. Only for the tool hooks.
    pub tools: Vec<String>,
    /// Seconds the hook may take; then its process group is killed and the call goes on.
    #[serde(deserialize_with = "super::lenient::secs")]
    pub timeout_s: u64,
    /// Names of chela's environment variables the hook gets (beyond PATH, HOME, LANG...).
    pub pass_env: Vec<String>,
}

impl Default for HookConfig {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            tools: Vec::new(),
            timeout_s: 10,
            pass_env: Vec::new(),
        }
    }
}

impl HookConfig {
    /// Whether the hook applies to tool `name` (an empty `tools` list applies to every tool).
    pub fn applies_to(&self, name: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|t| t == name)
    }
}

/// `[hooks]`: lists of hooks, each run in order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// How hook processes are confined: `landlock` (everything this user can reach except
    /// chela's store, RPC token file and config) | `off`.
    pub sandbox: super::SandboxMode,
    /// `web` | `none` | `all`: the TCP ports hook processes may connect to under the sandbox
    /// (listening is refused unless `all`).
    pub network: super::NetworkMode,
    /// More TCP ports hook processes may connect to under the sandbox.
    pub allow_ports: Vec<u16>,
    /// Run before a tool call; may block it (the model sees the reason).
    pub before_tool: Vec<HookConfig>,
    /// Run after a tool call that ran; output ignored.
    pub after_tool: Vec<HookConfig>,
    /// Run before a run, after its user turn is recorded; may block the run.
    pub before_run: Vec<HookConfig>,
    /// Run after a run ended (ok, aborted or error); output ignored.
    pub after_run: Vec<HookConfig>,
}

impl HooksConfig {
    /// Every hook list with its key name.
    pub fn lists(&self) -> [(&'static str, &[HookConfig]); 4] {
        [
            ("before_tool", &self.before_tool),
            ("after_tool", &self.after_tool),
            ("before_run", &self.before_run),
            ("after_run", &self.after_run),
        ]
    }

    /// Every hook, mutably (to resolve their programs).
    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = &mut HookConfig> {
        self.before_tool
            .iter_mut()
            .chain(self.after_tool.iter_mut())
            .chain(self.before_run.iter_mut())
            .chain(self.after_run.iter_mut())
    }

    /// Checks every hook: a program, a positive timeout, `tools` only on tool hooks. The
    /// error is the dotted key (`hooks.before_tool[0].command`) and what is wrong.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        for (list, hooks) in self.lists() {
            for (i, hook) in hooks.iter().enumerate() {
                let key = |field: &str| format!("hooks.{list}[{i}].{field}");
                if hook.command.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err((
                        key("command"),
                        "must name a program, e.g. [\"./hooks/guard.sh\"]".to_owned(),
                    ));
                }
                if hook.timeout_s == 0 {
                    return Err((key("timeout_s"), "must be at least 1".to_owned()));
                }
                if !hook.tools.is_empty() && list.ends_with("_run") {
                    return Err((
                        key("tools"),
                        "only before_tool and after_tool hooks take a tools list".to_owned(),
                    ));
                }
            }
        }
        Ok(())
    }
}
