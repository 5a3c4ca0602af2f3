//! Where skills come from, highest precedence first: the workspace's `skills/`, the managed
//! folder (`agent.managed_skills_dir`), the skills bundled into chela, then
//! `agent.skills_dirs`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::agent::tools::confined::{OpenError, read_text_in_workspace};

/// Where a skill was found; the order is precedence, highest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `<workspace>/skills/`.
    Workspace,
    /// `agent.managed_skills_dir` (default `~/.chela/skills`).
    Managed,
    /// Compiled into chela from the repository's `skills/`.
    Bundled,
    /// One of `agent.skills_dirs`.
    Extra,
}

impl Source {
    /// The lower-case name shown to people.
    pub fn label(self) -> &'static str {
        match self {
            Source::Workspace => "workspace",
            Source::Managed => "managed",
            Source::Bundled => "bundled",
            Source::Extra => "extra",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The folders skills are searched in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// The agent's workspace (its `skills/` folder is searched).
    pub workspace: PathBuf,
    /// The managed skills folder.
    pub managed: PathBuf,
    /// Extra folders, searched last, in order.
    pub extra: Vec<PathBuf>,
}

impl Roots {
    /// The roots `agent` configures.
    pub fn from_config(agent: &crate::config::AgentConfig) -> Roots {
        Roots {
            workspace: agent.workspace.clone(),
            managed: agent.managed_skills_dir.clone(),
            extra: agent.skills_dirs.clone(),
        }
    }

    /// Every searched folder with its source, highest precedence first; `None` is the bundled
    /// set. A folder named twice is searched once, at its highest place.
    pub fn ordered(&self) -> Vec<(Source, Option<PathBuf>)> {
        let mut out: Vec<(Source, Option<PathBuf>)> = vec![
            (Source::Workspace, Some(self.workspace.join("skills"))),
            (Source::Managed, Some(self.managed.clone())),
            (Source::Bundled, None),
        ];
        out.extend(self.extra.iter().map(|d| (Source::Extra, Some(d.clone()))));
        let mut seen: Vec<PathBuf> = Vec::new();
        out.retain(|(_, dir)| match dir {
            Some(dir) if seen.contains(dir) => false,
            Some(dir) => {
                seen.push(dir.clone());
                true
            }
            None => true,
        });
        out
    }
}

/// A SKILL.md that could not be read; the text is what `/skills` shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read: {reason}")]
pub struct ReadError {
    /// The kind of I/O error (not found, permission denied…).
    pub kind: std::io::ErrorKind,
    /// The error's text.
    pub reason: String,
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError {
            kind: e.kind(),
            reason: e.to_string(),
        }
    }
}

/// A SKILL.md found in a source, not yet parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Where it was found.
    pub source: Source,
    /// Its path (`bundled:<folder>/SKILL.md` for bundled skills).
    pub location: String,
    /// The name of the folder holding it.
    pub folder: String,
    /// Its text, or why it could not be read.
    pub text: Result<String, ReadError>,
}

/// Skills shipped inside the binary (`skills/` in the repository): folder and SKILL.md text.
const BUNDLED: &[(&str, &str)] = &[(
    "coding-agent",
    include_str!("../../../skills/coding-agent/SKILL.md"),
)];

/// Every SKILL.md of every root, highest precedence first, by folder name within a root.
pub fn candidates(roots: &Roots) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (source, dir) in roots.ordered() {
        match (source, dir) {
            (Source::Workspace, Some(_)) => out.extend(scan_workspace(&roots.workspace)),
            (_, Some(dir)) => out.extend(scan(&dir, source)),
            (_, None) => out.extend(bundled()),
        }
    }
    out
}

/// The bundled skills.
pub fn bundled() -> Vec<Candidate> {
    BUNDLED
        .iter()
        .map(|(folder, text)| Candidate {
            source: Source::Bundled,
            location: format!("bundled:{folder}/SKILL.md"),
            folder: (*folder).to_string(),
            text: Ok((*text).to_string()),
        })
        .collect()
}

/// The `*/SKILL.md` files of `dir` (a missing folder has none).
pub fn scan(dir: &Path, source: Source) -> Vec<Candidate> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut folders: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("SKILL.md").is_file())
        .collect();
    folders.sort();
    folders
        .into_iter()
        .map(|folder| {
            let path = folder.join("SKILL.md");
            Candidate {
                source,
                location: path.display().to_string(),
                folder: folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                text: std::fs::read_to_string(&path).map_err(ReadError::from),
            }
        })
        .collect()
}

/// The folder of a workspace that holds its skills.
pub const WORKSPACE_SKILLS: &str = "skills";

/// Largest SKILL.md read from a workspace (bytes, 1 MiB).
const MAX_SKILL_BYTES: u64 = 1 << 20;

/// The `skills/*/SKILL.md` files of `workspace`, each opened inside the workspace as the file
/// tools open paths: a link elsewhere inside it is followed, a `skills` folder, skill folder
/// or SKILL.md that leads out of it is refused (logged; such a skill shows as not loaded),
/// never read. (The managed and extra folders are the operator's: [`scan`] reads them as
/// they are.)
pub fn scan_workspace(workspace: &Path) -> Vec<Candidate> {
    let Ok(dir) = crate::agent::tools::paths::resolve_in_workspace(workspace, WORKSPACE_SKILLS)
    else {
        // A missing workspace has no skills; a `skills` link out of it is refused.
        if std::fs::symlink_metadata(workspace.join(WORKSPACE_SKILLS)).is_ok() {
            tracing::warn!(
                folder = WORKSPACE_SKILLS,
                workspace = %workspace.display(),
                "refused: the workspace's skills folder leads outside the workspace; not read"
            );
        }
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|folder| {
            let relative = format!("{WORKSPACE_SKILLS}/{folder}/SKILL.md");
            let text = match read_text_in_workspace(workspace, &relative, MAX_SKILL_BYTES) {
                Ok(text) => Ok(text),
                Err(e) if e.is_missing() || matches!(e, OpenError::NotAFile(_)) => return None,
                Err(e) => Err(ReadError::refused(&e)),
            };
            Some(Candidate {
                source: Source::Workspace,
                location: workspace.join(&relative).display().to_string(),
                folder,
                text,
            })
        })
        .collect()
}

impl ReadError {
    /// A SKILL.md chela would not read (or could not open) inside a workspace.
    fn refused(e: &OpenError) -> ReadError {
        match e {
            OpenError::Io { source, .. } => ReadError {
                kind: source.kind(),
                reason: source.to_string(),
            },
            _ => ReadError {
                kind: std::io::ErrorKind::PermissionDenied,
                reason: e.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_skill_folders_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "a"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("SKILL.md"), name).unwrap();
        }
        std::fs::create_dir(dir.path().join("no-skill")).unwrap();
        std::fs::write(dir.path().join("loose.md"), "x").unwrap();
        let found = scan(dir.path(), Source::Extra);
        let folders: Vec<&str> = found.iter().map(|c| c.folder.as_str()).collect();
        assert_eq!(folders, ["a", "b"]);
        assert_eq!(found[0].text.as_deref(), Ok("a"));
        assert!(found[0].location.ends_with("a/SKILL.md"));
        assert!(scan(&dir.path().join("missing"), Source::Extra).is_empty());
    }

    #[test]
    fn roots_are_ordered_by_precedence_without_repeats() {
        let roots = Roots {
            workspace: PathBuf::from("/ws"),
            managed: PathBuf::from("/managed"),
            extra: vec![
                PathBuf::from("/x"),
                PathBuf::from("/managed"),
                PathBuf::from("/x"),
            ],
        };
        assert_eq!(
            roots.ordered(),
            [
                (Source::Workspace, Some(PathBuf::from("/ws/skills"))),
                (Source::Managed, Some(PathBuf::from("/managed"))),
                (Source::Bundled, None),
                (Source::Extra, Some(PathBuf::from("/x"))),
            ]
        );
    }
}
