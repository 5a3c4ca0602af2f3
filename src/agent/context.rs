//! The system prompt: identity, skills, workspace bootstrap files (capped, with a visible
//! truncation marker), runtime facts (SPEC 7), then the tools each run may use.

use std::path::Path;

use crate::agent::provider::ToolSpec;
use crate::agent::skills::Skill;

/// Workspace files read into the prompt, in this order.
pub const BOOTSTRAP_FILES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "MEMORY.md",
];

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

/// `prompt` followed by the list of `tools` a run may use (none: the prompt alone).
pub fn with_tools(prompt: &str, tools: &[ToolSpec]) -> String {
    let mut out = String::from(prompt);
    if !tools.is_empty() {
        out.push_str("\n## Tools\n");
        for tool in tools {
            out.push_str(&format!("- {}: {}\n", tool.name, tool.description));
        }
    }
    out
}

/// The bootstrap files of `workspace`, each capped, all together capped.
pub fn bootstrap(workspace: &Path, caps: BootstrapCaps) -> String {
    let mut out = String::new();
    let mut budget = caps.total;
    for name in BOOTSTRAP_FILES {
        let Ok(text) = std::fs::read_to_string(workspace.join(name)) else {
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
