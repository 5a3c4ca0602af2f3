//! Confining tool paths to the agent's workspace. A refusal names only the path as it was
//! asked for: never the canonical workspace nor where a symlink leads (the fields keep them
//! for the code, the text the model reads leaves them out).

use std::path::{Component, Path, PathBuf};

/// Why a path was refused; the text is what a model or an ACP agent reads.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The requested path is empty.
    #[error("refused: the path is empty")]
    Empty,
    /// The requested path contains a NUL byte.
    #[error("refused: the path contains a NUL byte")]
    Nul,
    /// The workspace itself cannot be resolved (missing or unreadable).
    #[error("the workspace is not usable: {source}")]
    Workspace {
        /// The configured workspace.
        workspace: PathBuf,
        /// Why it could not be resolved.
        source: std::io::Error,
    },
    /// The path (after `..` is applied) is outside the workspace.
    #[error("refused: {requested} is outside the workspace; use a path inside it")]
    OutsideWorkspace {
        /// The path as asked for.
        requested: String,
        /// The canonical workspace.
        root: PathBuf,
    },
    /// An existing part of the path cannot be resolved (e.g. a dangling symlink).
    #[error("refused: {requested} cannot be resolved ({source}); it may be a dangling symlink")]
    Unresolvable {
        /// The path as asked for.
        requested: String,
        /// Its longest existing part.
        existing: PathBuf,
        /// Why it could not be resolved.
        source: std::io::Error,
    },
    /// A symlink on the path leads outside the workspace.
    #[error("refused: {requested} leads outside the workspace through a symlink")]
    SymlinkEscape {
        /// The path as asked for.
        requested: String,
        /// Where it leads.
        target: PathBuf,
    },
}

/// Resolves `requested` to a path inside `workspace`, or says why it is refused.
///
/// Relative paths resolve against the workspace; absolute paths must point into it. `..` is
/// applied lexically and refused when it leaves the workspace. Symlinks are followed by
/// canonicalizing the longest existing ancestor (a dangling symlink counts as existing and is
/// refused), which must stay under the canonical workspace; components that do not exist yet
/// (a file about to be written) are appended to it. The returned path has no symlinks in its
/// existing part, so using it acts on what was checked.
pub fn resolve_in_workspace(workspace: &Path, requested: &str) -> Result<PathBuf, PathError> {
    if requested.is_empty() {
        return Err(PathError::Empty);
    }
    if requested.contains('\0') {
        return Err(PathError::Nul);
    }
    let root = std::fs::canonicalize(workspace).map_err(|source| PathError::Workspace {
        workspace: workspace.to_path_buf(),
        source,
    })?;
    let req = Path::new(requested);
    let joined = if req.is_absolute() {
        let norm = normalize(req);
        // Accept absolute paths spelled through a non-canonical workspace path.
        let ws = std::path::absolute(workspace).map(|p| normalize(&p));
        match ws.as_ref().map(|ws| norm.strip_prefix(ws)) {
            Ok(Ok(rest)) => root.join(rest),
            _ => norm,
        }
    } else {
        normalize(&root.join(req))
    };
    if !joined.starts_with(&root) {
        return Err(PathError::OutsideWorkspace {
            requested: requested.to_owned(),
            root,
        });
    }
    let existing = joined
        .ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(&root);
    let canonical = std::fs::canonicalize(existing).map_err(|source| PathError::Unresolvable {
        requested: requested.to_owned(),
        existing: existing.to_path_buf(),
        source,
    })?;
    let rest = joined.strip_prefix(existing).unwrap_or(Path::new(""));
    let resolved = if rest.as_os_str().is_empty() {
        canonical
    } else {
        canonical.join(rest)
    };
    if !resolved.starts_with(&root) {
        return Err(PathError::SymlinkEscape {
            requested: requested.to_owned(),
            target: resolved,
        });
    }
    Ok(resolved)
}

/// Applies `.` and `..` lexically; `..` at the root stays at the root.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("sub")).unwrap();
        std::fs::write(ws.path().join("sub/a.txt"), "a").unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        (ws, outside)
    }

    #[test]
    fn paths_inside_the_workspace_resolve() {
        let (ws, _outside) = setup();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        assert_eq!(
            resolve_in_workspace(ws.path(), "sub/a.txt").unwrap(),
            root.join("sub/a.txt")
        );
        assert_eq!(resolve_in_workspace(ws.path(), ".").unwrap(), root);
        assert_eq!(
            resolve_in_workspace(ws.path(), "sub/../x/new.txt").unwrap(),
            root.join("x/new.txt")
        );
        let abs = ws.path().join("sub/a.txt");
        assert_eq!(
            resolve_in_workspace(ws.path(), abs.to_str().unwrap()).unwrap(),
            root.join("sub/a.txt")
        );
    }

    #[test]
    fn dotdot_leaving_the_workspace_is_refused() {
        let (ws, _outside) = setup();
        let err = resolve_in_workspace(ws.path(), "../etc/passwd")
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the workspace"), "{err}");
        let err = resolve_in_workspace(ws.path(), "sub/../../x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the workspace"), "{err}");
    }

    #[test]
    fn absolute_paths_outside_are_refused() {
        let (ws, outside) = setup();
        let secret = outside.path().join("secret");
        let err = resolve_in_workspace(ws.path(), secret.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside the workspace"), "{err}");
        assert!(resolve_in_workspace(ws.path(), "/etc/passwd").is_err());
    }

    #[test]
    fn symlink_escapes_are_refused() {
        let (ws, outside) = setup();
        symlink(outside.path(), ws.path().join("out")).unwrap();
        symlink(outside.path().join("secret"), ws.path().join("leak")).unwrap();
        symlink(
            outside.path().join("nothing-yet"),
            ws.path().join("dangling"),
        )
        .unwrap();
        for path in ["out/secret", "out/new-file", "leak", "out"] {
            let err = resolve_in_workspace(ws.path(), path)
                .unwrap_err()
                .to_string();
            assert!(err.contains("through a symlink"), "{path}: {err}");
        }
        let err = resolve_in_workspace(ws.path(), "dangling")
            .unwrap_err()
            .to_string();
        assert!(err.contains("dangling"), "{err}");
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed() {
        let (ws, _outside) = setup();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        symlink(root.join("sub"), ws.path().join("alias")).unwrap();
        assert_eq!(
            resolve_in_workspace(ws.path(), "alias/a.txt").unwrap(),
            root.join("sub/a.txt")
        );
    }

    #[test]
    fn refusals_name_only_the_path_asked_for() {
        let (ws, outside) = setup();
        symlink(outside.path().join("secret"), ws.path().join("leak")).unwrap();
        symlink(outside.path(), ws.path().join("out")).unwrap();
        symlink(outside.path().join("gone"), ws.path().join("dangling")).unwrap();
        let hidden = [
            outside.path().to_path_buf(),
            std::fs::canonicalize(outside.path()).unwrap(),
            ws.path().to_path_buf(),
            std::fs::canonicalize(ws.path()).unwrap(),
        ];
        let secret = outside.path().join("secret");
        let cases = [
            "leak",
            "out/secret",
            "out/new",
            "dangling",
            "dangling/x",
            "../x",
            "/etc/passwd",
            secret.to_str().unwrap(),
        ];
        for requested in cases {
            let text = resolve_in_workspace(ws.path(), requested)
                .unwrap_err()
                .to_string();
            assert!(
                text.starts_with(&format!("refused: {requested} ")),
                "{text}"
            );
            // The path as given may itself be absolute: only the rest of the text counts.
            let rest = text.replacen(requested, "", 1);
            for path in &hidden {
                assert!(!rest.contains(path.to_str().unwrap()), "{text}");
            }
        }
        let text = resolve_in_workspace(&ws.path().join("missing"), "x")
            .unwrap_err()
            .to_string();
        assert!(!text.contains(ws.path().to_str().unwrap()), "{text}");
    }

    #[test]
    fn refusals_name_their_cause() {
        let (ws, _outside) = setup();
        assert!(matches!(
            resolve_in_workspace(ws.path(), ""),
            Err(PathError::Empty)
        ));
        assert!(matches!(
            resolve_in_workspace(ws.path(), "a\0b"),
            Err(PathError::Nul)
        ));
        assert!(matches!(
            resolve_in_workspace(ws.path(), "../x"),
            Err(PathError::OutsideWorkspace { requested, .. }) if requested == "../x"
        ));
        assert!(matches!(
            resolve_in_workspace(&ws.path().join("missing"), "x"),
            Err(PathError::Workspace { .. })
        ));
    }
}
