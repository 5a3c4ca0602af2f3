//! The system prompt: identity, skills, workspace bootstrap files (capped, with a visible
//! truncation marker), runtime facts (SPEC 7), then the tools each run may use.

use std::path::Path;

use crate::agent::provider::ToolSpec;
use crate::agent::skills::Skill;
use crate::agent::tools::confined::read_text_in_workspace;

/// Workspace files read into the prompt, in this order.
pub const BOOTSTRAP_FILES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "MEMORY.md",
];

/// Largest bootstrap file read (bytes, 16 MiB); a larger one is left out, with a warning.
const MAX_BOOTSTRAP_BYTES: u64 = 16 << 20;

/// Limits on bootstrap text.
#[derive(Debug, Clone, Copy)]
pub struct BootstrapCaps {
    /// Most chars taken from one file.
    pub per_file: usize,
    /// Most chars taken from all files together.
    pub total: usize,
}

/// Everything the prompt is made of.
pub struct PromptParts<'a> {
    /// The identity line(s).
    pub identity: &'a str,
    /// Skills available.
    pub skills: &'a [Skill],
    /// The agent's workspace.
    pub workspace: &'a Path,
    /// Caps on bootstrap files.
    pub caps: BootstrapCaps,
    /// `provider/model`, for the runtime facts.
    pub model: &'a str,
}

/// Builds the system prompt.
pub fn system_prompt(parts: &PromptParts<'_>) -> String {
    let mut out = String::from(parts.identity.trim());
    out.push('\n');
    if !parts.skills.is_empty() {
        out.push_str("\n## Skills\nRead a skill's SKILL.md when its description fits the task.\n");
        for skill in parts.skills {
            out.push_str(&format!(
                "- {} ({}): {}\n",
                skill.name, skill.location, skill.description
            ));
        }
    }
    let bootstrap = bootstrap(parts.workspace, parts.caps);
    if !bootstrap.is_empty() {
        out.push_str("\n## Workspace files\n");
        out.push_str(&bootstrap);
    }
    out.push_str(&format!(
        "\n## Runtime\n- date: {}\n- time zone: UTC\n- host: {}\n- model: {}\n- workspace: {}\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        hostname(),
        parts.model,
        parts.workspace.display()
    ));
    out
}

/// The prompt-cache key of session `key` of agent `agent`: the same for each of its calls, and
/// naming neither (the first 16 hex digits of a SHA-256 of both).
pub fn cache_key(agent: &str, key: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{agent}\n{key}").as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// `prompt` followed by the list of `tools` a run may use (none: the prompt alone).
pub fn with_tools<'a>(prompt: &str, tools: impl IntoIterator<Item = &'a ToolSpec>) -> String {
    let mut out = String::from(prompt);
    let mut tools = tools.into_iter().peekable();
    if tools.peek().is_some() {
        out.push_str("\n## Tools\n");
        for tool in tools {
            out.push_str(&format!("- {}: {}\n", tool.name, tool.description));
        }
    }
    out
}

/// The bootstrap files of `workspace`, each capped, all together capped. Each is opened
/// inside the workspace as the file tools open paths: a symlink to elsewhere in the workspace
/// is followed, one out of it is refused (logged, never read).
pub fn bootstrap(workspace: &Path, caps: BootstrapCaps) -> String {
    let mut out = String::new();
    let mut budget = caps.total;
    for name in BOOTSTRAP_FILES {
        let Some(text) = bootstrap_file(workspace, name) else {
            continue;
        };
        if budget == 0 {
            out.push_str(&format!(
                "### {name}\n[... omitted: bootstrap limit of {} chars reached ...]\n",
                caps.total
            ));
            continue;
        }
        let take = caps.per_file.min(budget);
        let total = text.chars().count();
        out.push_str(&format!("### {name}\n"));
        if total > take {
            out.extend(text.chars().take(take));
            out.push_str(&format!(
                "\n[... truncated: {take} of {total} chars shown ...]\n"
            ));
            budget -= take;
        } else {
            out.push_str(&text);
            out.push('\n');
            budget -= total;
        }
    }
    out
}

/// The text of bootstrap file `name`, read as [`read_text_in_workspace`] reads (a symlink
/// out of the workspace is refused, with a warning, never read); `None` when missing,
/// refused or unreadable.
fn bootstrap_file(workspace: &Path, name: &str) -> Option<String> {
    match read_text_in_workspace(workspace, name, MAX_BOOTSTRAP_BYTES) {
        Ok(text) => Some(text),
        Err(e) if e.is_missing() || e.is_escape() => None,
        Err(e) => {
            tracing::warn!(file = name, error = %e, "a bootstrap file is left out of the prompt");
            None
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_files_are_capped_with_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "a".repeat(50)).unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "s".repeat(50)).unwrap();
        let text = bootstrap(
            dir.path(),
            BootstrapCaps {
                per_file: 30,
                total: 40,
            },
        );
        assert!(text.contains(&format!(
            "{}\n[... truncated: 30 of 50 chars shown ...]",
            "a".repeat(30)
        )));
        assert!(text.contains(&format!(
            "{}\n[... truncated: 10 of 50 chars shown ...]",
            "s".repeat(10)
        )));
    }

    #[test]
    fn bootstrap_files_linked_out_of_the_workspace_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("id_rsa");
        std::fs::write(&secret, "PRIVATE KEY").unwrap();
        std::fs::write(
            outside.path().join("config.toml"),
            "api_key = \"sk-SECRET\"",
        )
        .unwrap();
        let ws = dir.path();
        std::os::unix::fs::symlink(&secret, ws.join("USER.md")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("config.toml"), ws.join("AGENTS.md"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
        std::os::unix::fs::symlink("out/id_rsa", ws.join("MEMORY.md")).unwrap();
        // A link that stays inside the workspace is followed, as the file tools follow it.
        std::fs::write(ws.join("notes.md"), "be kind").unwrap();
        std::os::unix::fs::symlink("notes.md", ws.join("SOUL.md")).unwrap();
        let caps = BootstrapCaps {
            per_file: 1000,
            total: 1000,
        };
        let text = bootstrap(ws, caps);
        assert!(
            !text.contains("PRIVATE") && !text.contains("SECRET"),
            "{text}"
        );
        assert!(!text.contains("### USER.md") && !text.contains("### AGENTS.md"));
        assert!(!text.contains("### MEMORY.md"), "{text}");
        assert_eq!(text, "### SOUL.md\nbe kind\n");
    }

    #[test]
    fn prompt_lists_tools_skills_and_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let tools = [ToolSpec {
            name: "ls".into(),
            description: "list".into(),
            parameters: serde_json::json!({}),
        }];
        let skills = [Skill {
            name: "s".into(),
            description: "d".into(),
            location: "bundled:s".into(),
        }];
        let prompt = system_prompt(&PromptParts {
            identity: "You are chela.",
            skills: &skills,
            workspace: dir.path(),
            caps: BootstrapCaps {
                per_file: 10,
                total: 10,
            },
            model: "echo/echo",
        });
        assert!(!prompt.contains("- ls: list"));
        let prompt = with_tools(&prompt, &tools);
        assert!(prompt.starts_with("You are chela."));
        assert!(prompt.contains("- ls: list"));
        assert!(prompt.contains("- s (bundled:s): d"));
        assert!(prompt.contains("- model: echo/echo"));
    }
}
