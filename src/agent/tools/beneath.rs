//! Folders and files opened beneath a workspace without ever following a link: every step
//! of the way is opened relative to the open folder before it, with `O_NOFOLLOW`, so a
//! folder swapped for a link at any moment is refused, never followed, and nothing (no
//! folder, no empty file) is created outside. Blocking (a few local system calls).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{
    AtFlags, CWD, FileType, Mode, OFlags, mkdirat, openat, renameat, statat, unlinkat,
};
use rustix::io::Errno;

/// Why a folder or file beneath the workspace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BeneathError {
    /// The path is not beneath the workspace (or has `..` in it).
    #[error("not beneath the workspace")]
    Outside,
    /// A link (or something that is no folder) where a folder must be: swapped since the
    /// path was resolved.
    #[error("a link where a folder was")]
    Link,
    /// The system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Flags of every open here: no link followed, no controlling terminal, closed on exec.
fn base() -> OFlags {
    OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// Flags of a folder on the way: a path handle (no read permission needed, only search),
/// never through a link.
fn folder_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// `path` (resolved, beneath the canonical workspace `root`) as its folder relative to
/// `root` and its file name.
pub fn split(root: &Path, path: &Path) -> Result<(PathBuf, OsString), BeneathError> {
    let rel = path.strip_prefix(root).map_err(|_| BeneathError::Outside)?;
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(BeneathError::Outside);
    }
    let name = rel.file_name().ok_or(BeneathError::Outside)?.to_owned();
    let folder = rel.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((folder, name))
}

/// Opens the folder `rel` beneath `root`, creating the missing folders on the way when
/// `create`. `root` is the workspace as canonicalized once (absolute, no link in it): it is
/// opened from `/` one step at a time without following a link either, so a workspace
/// folder swapped for a link after it was resolved is refused too.
pub fn open_dir(root: &Path, rel: &Path, create: bool) -> Result<OwnedFd, BeneathError> {
    let mut dir = openat(CWD, "/", folder_flags(), Mode::empty()).map_err(io)?;
    for component in root.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => dir = step(&dir, name, false)?,
            _ => return Err(BeneathError::Outside),
        }
    }
    for component in rel.components() {
        let Component::Normal(name) = component else {
            return Err(BeneathError::Outside);
        };
        dir = step(&dir, name, create)?;
    }
    Ok(dir)
}

/// Opens folder `name` of the open folder `dir` (made first when missing, with `create`),
/// never through a link.
fn step(dir: &OwnedFd, name: &OsStr, create: bool) -> Result<OwnedFd, BeneathError> {
    if create {
        match mkdirat(dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io(e)),
        }
    }
    openat(dir, name, folder_flags(), Mode::empty()).map_err(|e| match e {
        Errno::LOOP => BeneathError::Link,
        // `O_PATH | O_NOFOLLOW | O_DIRECTORY` on a link answers "not a folder": look at the
        // entry itself.
        Errno::NOTDIR if is_link(dir, name) => BeneathError::Link,
        e => io(e),
    })
}

/// Whether entry `name` of `dir` is a symbolic link (not followed).
fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// Opens file `name` of the open folder `dir` for writing, created when missing (only when
/// missing with `exclusive`), never through a link.
pub fn open_for_writing(dir: &OwnedFd, name: &OsStr, exclusive: bool) -> std::io::Result<File> {
    let mut flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NONBLOCK | base();
    if exclusive {
        flags |= OFlags::EXCL;
    }
    let fd = openat(dir, name, flags, Mode::from_raw_mode(0o666))?;
    Ok(File::from(fd))
}

/// Renames `from` to `to`, both in the open folder `dir`.
pub fn rename_in(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
    Ok(renameat(dir, from, dir, to)?)
}

/// Removes file `name` (a link itself, never its target) from the open folder `dir`; a
/// missing one is no error.
pub fn remove_in(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
    match unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn io(e: Errno) -> BeneathError {
    BeneathError::Io(e.into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn folders_are_made_beneath_and_a_link_on_the_way_is_refused_without_making_anything() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let dir = open_dir(&root, Path::new("a/b"), true).unwrap();
        let mut file = open_for_writing(&dir, OsStr::new("f.txt"), true).unwrap();
        file.write_all(b"hi").unwrap();
        assert_eq!(std::fs::read(root.join("a/b/f.txt")).unwrap(), b"hi");
        // Exclusive: an existing file is not opened again.
        assert!(open_for_writing(&dir, OsStr::new("f.txt"), true).is_err());
        rename_in(&dir, OsStr::new("f.txt"), OsStr::new("g.txt")).unwrap();
        remove_in(&dir, OsStr::new("g.txt")).unwrap();
        remove_in(&dir, OsStr::new("g.txt")).unwrap();
        // A folder swapped for a link out: refused, nothing made at its target.
        symlink(outside.path(), root.join("link")).unwrap();
        assert!(matches!(
            open_dir(&root, Path::new("link/new"), true),
            Err(BeneathError::Link)
        ));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // A file where a folder must be: no folder, but no link either.
        std::fs::write(root.join("plain"), "x").unwrap();
        assert!(matches!(
            open_dir(&root, Path::new("plain/x"), true),
            Err(BeneathError::Io(_))
        ));
    }

    #[test]
    fn a_workspace_swapped_for_a_link_after_it_was_resolved_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = base.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir(&root).unwrap();
        // Resolved while a folder; then swapped for a link out.
        std::fs::rename(&root, base.path().join("ws.old")).unwrap();
        symlink(outside.path(), &root).unwrap();
        assert!(matches!(
            open_dir(&root, Path::new("new"), true),
            Err(BeneathError::Link)
        ));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_link_as_the_file_is_not_followed() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let target = outside.path().join("secret");
        std::fs::write(&target, "keep").unwrap();
        symlink(&target, root.join("f")).unwrap();
        let dir = open_dir(&root, Path::new(""), false).unwrap();
        assert!(open_for_writing(&dir, OsStr::new("f"), false).is_err());
        assert!(open_for_writing(&dir, OsStr::new("f"), true).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn split_takes_only_paths_beneath_the_root() {
        let root = Path::new("/ws");
        assert_eq!(
            split(root, Path::new("/ws/a/b.txt")).unwrap(),
            (PathBuf::from("a"), OsString::from("b.txt"))
        );
        assert_eq!(
            split(root, Path::new("/ws/b.txt")).unwrap(),
            (PathBuf::new(), OsString::from("b.txt"))
        );
        assert!(split(root, Path::new("/other/b.txt")).is_err());
        assert!(split(root, Path::new("/ws/a/../../x")).is_err());
        assert!(split(root, Path::new("/ws")).is_err());
    }
}
