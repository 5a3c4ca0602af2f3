//! Skills: folders holding a SKILL.md with `name` and `description` front matter, listed in
//! the system prompt. Workspace skills win over bundled ones of the same name, then extra dirs.

use std::path::{Path, PathBuf};

/// A skill the agent is told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Skill name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Where its SKILL.md is (`bundled:` for skills compiled into chela).
    pub location: String,
}

/// Skills shipped inside the binary (`skills/` in the repository).
const BUNDLED: &[(&str, &str)] = &[(
    "coding-agent",
    include_str!("../../skills/coding-agent/SKILL.md"),
)];

/// Loads skills: workspace `skills/` first, then bundled, then `extra_dirs`.
pub fn load(workspace: &Path, extra_dirs: &[PathBuf]) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    let mut add = |skill: Skill| {
        if !skills.iter().any(|s| s.name == skill.name) {
            skills.push(skill);
        }
    };
    for skill in scan(&workspace.join("skills")) {
        add(skill);
    }
    for (dir, text) in BUNDLED {
        if let Some(skill) = parse(text, &format!("bundled:{dir}/SKILL.md")) {
            add(skill);
        }
    }
    for dir in extra_dirs {
        for skill in scan(dir) {
            add(skill);
        }
    }
    skills
}

fn scan(dir: &Path) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join("SKILL.md"))
        .collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            parse(&text, &p.display().to_string())
        })
        .collect()
}

/// Parses the `---` front matter of a SKILL.md.
pub fn parse(text: &str, location: &str) -> Option<Skill> {
    let body = text.strip_prefix("---")?;
    let (front, _) = body.split_once("\n---")?;
    let field = |key: &str| {
        front.lines().find_map(|line| {
            let value = line.trim().strip_prefix(key)?.strip_prefix(':')?;
            Some(value.trim().trim_matches('"').to_string())
        })
    };
    Some(Skill {
        name: field("name")?,
        description: field("description")?,
        location: location.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_coding_agent_skill_loads() {
        let dir = tempfile::tempdir().unwrap();
        let skills = load(dir.path(), &[]);
        assert!(
            skills
                .iter()
                .any(|s| s.name == "coding-agent" && s.location.starts_with("bundled:"))
        );
    }

    #[test]
    fn workspace_skill_overrides_bundled() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("skills/coding-agent");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: coding-agent\ndescription: mine\n---\nbody",
        )
        .unwrap();
        let skills = load(dir.path(), &[]);
        assert_eq!(
            skills.iter().filter(|s| s.name == "coding-agent").count(),
            1
        );
        assert_eq!(skills[0].description, "mine");
    }

    #[test]
    fn missing_front_matter_is_skipped() {
        assert_eq!(parse("# no front matter", "x"), None);
    }
}
