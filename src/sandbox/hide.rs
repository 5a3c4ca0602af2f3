//! A deny-list built from Landlock grants: "everything this user can reach except these
//! paths". Landlock only grants, and a grant on a folder covers all beneath it, so for each
//! hidden path H and each ancestor A of H (from `/` down) A itself gets only directory
//! listing, and every entry of A that is neither hidden nor an ancestor of a hidden path gets
//! full access. Symlink entries get no rule: a rule opens its path, following the link, and
//! a link pointing into the store would open the store (what a link points to stays
//! reachable through the rule on its target, as merged-/usr links like `/bin` do).
//!
//! Limits: the expansion is a snapshot taken just before the sandbox applies. A file or folder
//! created later directly in an ancestor (a new top-level file in `$HOME`) cannot be opened,
//! and nothing can be created, renamed or removed directly in an ancestor; a hard link or a
//! bind mount of a hidden file made elsewhere is not hidden.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The grants that hide a set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expanded {
    /// Ancestors of hidden paths: directory listing only (beneath too, so a hidden folder's
    /// names can be listed, never opened).
    pub list: Vec<PathBuf>,
    /// Everything else next to them: full access beneath each.
    pub full: Vec<PathBuf>,
}

/// The grants that open everything but `hidden` (and what lies beneath each). Every path is
/// compared as it resolves through symlinks now, as Landlock applies a rule to the real folder
/// it opens (a name spelled through a linked parent would not match its real entry); the
/// caller passes what it resolved once at start as well, so a link changed since cannot
/// uncover the old target. Ancestors that cannot be listed grant nothing beneath them.
pub fn expand(hidden: &[PathBuf]) -> Expanded {
    let hidden: Vec<PathBuf> = hidden
        .iter()
        .map(|p| real(p))
        .collect::<BTreeSet<PathBuf>>()
        .into_iter()
        .collect();
    let is_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
    let ancestors: BTreeSet<PathBuf> = hidden
        .iter()
        .flat_map(|h| h.ancestors().skip(1))
        .filter(|a| !a.as_os_str().is_empty() && !is_hidden(a))
        .map(Path::to_path_buf)
        .collect();
    let mut out = Expanded::default();
    for ancestor in &ancestors {
        let Ok(entries) = std::fs::read_dir(ancestor) else {
            continue;
        };
        out.list.push(ancestor.clone());
        for entry in entries.flatten() {
            let path = entry.path();
            if ancestors.contains(&path) || is_hidden(&path) {
                continue;
            }
            // Not followed: a symlink's own type.
            if entry.file_type().is_ok_and(|t| !t.is_symlink()) {
                out.full.push(path);
            }
        }
    }
    out
}

/// `path` made absolute and resolved through symlinks as far as it exists.
pub fn real(path: &Path) -> PathBuf {
    if let Ok(resolved) = path.canonicalize() {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => real(parent).join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// `root/{home/{.codex/, notes.txt, chela/{data/, data.rpc, config.toml, logs/}}, ws/, link -> home/chela/data}`.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for folder in ["home/.codex", "home/chela/data", "home/chela/logs", "ws"] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        for file in [
            "home/notes.txt",
            "home/chela/data.rpc",
            "home/chela/config.toml",
        ] {
            std::fs::write(root.join(file), "x").unwrap();
        }
        std::os::unix::fs::symlink(root.join("home/chela/data"), root.join("link")).unwrap();
        (dir, root)
    }

    #[test]
    fn siblings_are_open_hidden_paths_and_their_ancestors_are_not() {
        let (_dir, root) = tree();
        let chela = root.join("home/chela");
        let hidden = [
            chela.join("data"),
            chela.join("data.rpc"),
            chela.join("data.highwater"),
            chela.join("config.toml"),
        ];
        let got = expand(&hidden);
        for folder in [&root, &root.join("home"), &chela] {
            assert!(got.list.contains(folder), "{folder:?} in {got:?}");
            assert!(!got.full.contains(folder), "{folder:?} in {got:?}");
        }
        for open in ["home/.codex", "home/notes.txt", "home/chela/logs", "ws"] {
            assert!(got.full.contains(&root.join(open)), "{open} in {got:?}");
        }
        for path in &hidden {
            assert!(
                !got.full.contains(path) && !got.list.contains(path),
                "{path:?}"
            );
        }
        // The link into the store gets no rule; nothing beneath the store is listed either.
        assert!(!got.full.contains(&root.join("link")), "{got:?}");
        assert!(got.full.iter().all(|p| !p.starts_with(chela.join("data"))));
        // `/` and the folders above the temp dir are ancestors too.
        assert!(got.list.contains(&PathBuf::from("/")));
    }

    #[test]
    fn a_hidden_path_given_through_a_symlink_is_hidden_at_its_target() {
        let (_dir, root) = tree();
        let got = expand(&[root.join("link")]);
        assert!(!got.full.contains(&root.join("home/chela/data")), "{got:?}");
        assert!(got.list.contains(&root.join("home/chela")), "{got:?}");
        assert!(
            got.full.contains(&root.join("home/chela/data.rpc")),
            "{got:?}"
        );
    }

    #[test]
    fn a_link_retargeted_after_resolution_does_not_uncover_its_old_target() {
        let (_dir, root) = tree();
        let store = root.join("home/chela/data");
        // Resolved once by chela (as `child::hidden` does), then the link is pointed away.
        let hidden = [real(&root.join("link")), root.join("link")];
        std::fs::remove_file(root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("ws"), root.join("link")).unwrap();
        let got = expand(&hidden);
        assert!(
            got.full.iter().all(|p| !store.starts_with(p)),
            "the store is still hidden: {got:?}"
        );
        assert!(
            got.full.iter().all(|p| !root.join("ws").starts_with(p)),
            "the new target is hidden too: {got:?}"
        );
    }

    #[test]
    fn a_hidden_path_spelled_through_a_linked_parent_stays_hidden() {
        let (_dir, root) = tree();
        std::os::unix::fs::symlink(root.join("home/chela"), root.join("alias")).unwrap();
        let store = root.join("home/chela/data");
        let got = expand(&[root.join("alias/data"), real(&root.join("alias/data"))]);
        assert!(
            got.full.iter().all(|p| !store.starts_with(p)),
            "the store is hidden: {got:?}"
        );
        assert!(got.full.contains(&root.join("home/chela/logs")), "{got:?}");
    }

    #[test]
    fn a_path_inside_another_hidden_path_opens_nothing_beneath_it() {
        let (_dir, root) = tree();
        let chela = root.join("home/chela");
        let got = expand(&[chela.clone(), chela.join("data.rpc")]);
        assert!(!got.list.contains(&chela), "{got:?}");
        assert!(got.full.iter().all(|p| !p.starts_with(&chela)), "{got:?}");
        assert!(got.full.contains(&root.join("home/.codex")));
        assert_eq!(expand(&[]), Expanded::default());
    }
}
