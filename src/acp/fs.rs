//! The client's file service: `fs/read_text_file` and `fs/write_text_file`, confined to the
//! session's folder (`..`, absolute paths elsewhere and symlink escapes refused). chela
//! serves these itself, outside any sandbox, so chela's own files (the store folder, the RPC
//! token file, the config file: [`crate::sandbox::child::hidden`]) are refused even when the
//! session's folder holds them.

use std::path::{Path, PathBuf};

use agent_client_protocol::ErrorCode;

use crate::agent::tools::confined::{OpenError, WriteError, read_resolved, write_resolved};
use crate::agent::tools::paths::{PathError, resolve_in_workspace};

/// Most bytes one read returns (an agent asking for more gets an error, not a huge reply).
const MAX_READ_BYTES: u64 = 8 * 1024 * 1024;

/// Why a file request was refused or failed; the text is what the agent reads.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is one of chela's own files or beneath one (the store, the RPC token file,
    /// the config file). The text names only the path asked for.
    #[error("refused: {} is one of chela's own files", path.display())]
    Hidden {
        /// The path as asked for.
        path: PathBuf,
    },
    /// The request names no session chela knows.
    #[error("unknown session")]
    UnknownSession,
    /// The path is refused (outside the session's folder, empty, a symlink escape…).
    #[error(transparent)]
    Path(#[from] PathError),
    /// The file does not exist.
    #[error("cannot read {}: {source}", path.display())]
    NotFound {
        /// The path as asked for.
        path: PathBuf,
        /// The error reading it.
        source: std::io::Error,
    },
    /// The file exists but cannot be read (permissions, not text, a folder…).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The path as asked for.
        path: PathBuf,
        /// The error reading it.
        source: std::io::Error,
    },
    /// The file is larger than one read returns.
    #[error("{} is {size} bytes; the most one read returns is {max}", path.display())]
    TooLarge {
        /// The path as asked for.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The most one read returns.
        max: u64,
    },
    /// A parent folder of the file cannot be created.
    #[error("cannot create the folders of {}: {source}", path.display())]
    CreateDir {
        /// The path as asked for.
        path: PathBuf,
        /// The error creating it.
        source: std::io::Error,
    },
    /// Refused: the file turned out to be a symlink, or outside the session's folder once
    /// open (swapped after the path was checked). The text names the path as asked for.
    #[error("{0}")]
    Refused(String),
    /// The file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The path as asked for.
        path: PathBuf,
        /// The error writing it.
        source: std::io::Error,
    },
}

impl FsError {
    /// The ACP error code answered: a missing file or session is "resource not found"
    /// (`-32002`); a path outside the session's folder, a folder or non-text read as a file,
    /// or a file too large "invalid params" (`-32602`); any other read or write the system
    /// refused an "internal error" (`-32603`).
    pub fn code(&self) -> ErrorCode {
        use std::io::ErrorKind as K;
        match self {
            FsError::UnknownSession | FsError::NotFound { .. } => ErrorCode::RESOURCE_NOT_FOUND,
            FsError::Read { source, .. }
                if matches!(
                    source.kind(),
                    K::IsADirectory | K::InvalidInput | K::InvalidData
                ) =>
            {
                ErrorCode::INVALID_PARAMS
            }
            FsError::Read { .. } | FsError::CreateDir { .. } | FsError::Write { .. } => {
                ErrorCode::INTERNAL_ERROR
            }
            FsError::Path(_)
            | FsError::Refused(_)
            | FsError::Hidden { .. }
            | FsError::TooLarge { .. } => ErrorCode::INVALID_PARAMS,
        }
    }

    /// `NotFound` for a missing file, `Read` otherwise.
    fn read(path: &Path, source: std::io::Error) -> Self {
        let path = path.to_path_buf();
        if source.kind() == std::io::ErrorKind::NotFound {
            FsError::NotFound { path, source }
        } else {
            FsError::Read { path, source }
        }
    }
}

/// `path` (as asked for) resolved inside `root`, refused when it is one of `hidden` or
/// beneath one (each compared as given and as it resolves through symlinks now).
fn resolve(root: &Path, hidden: &[PathBuf], path: &Path) -> Result<PathBuf, FsError> {
    let resolved = resolve_in_workspace(root, &path.to_string_lossy())?;
    let is_hidden = hidden
        .iter()
        .any(|h| resolved.starts_with(h) || resolved.starts_with(crate::sandbox::hide::real(h)));
    if is_hidden {
        return Err(FsError::Hidden {
            path: path.to_path_buf(),
        });
    }
    Ok(resolved)
}

/// Reads `path` (inside `root`, not one of `hidden`), optionally from 1-based `line` for
/// `limit` lines.
pub async fn read_text(
    root: &Path,
    hidden: &[PathBuf],
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, FsError> {
    let resolved = resolve(root, hidden, path)?;
    read_resolved_text(root, resolved, path, line, limit).await
}

/// [`read_text`] once `path` is resolved: read as [`read_resolved`] reads (no symlink
/// followed at the end, the open file checked to be inside `root`).
async fn read_resolved_text(
    root: &Path,
    resolved: PathBuf,
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, FsError> {
    let (root, name) = (root.to_path_buf(), path.to_string_lossy().into_owned());
    let read =
        tokio::task::spawn_blocking(move || read_resolved(&root, &resolved, &name, MAX_READ_BYTES))
            .await
            .map_err(|e| FsError::read(path, std::io::Error::other(e)))?;
    let bytes = read.map_err(|e| match e {
        OpenError::Path(e) => FsError::Path(e),
        OpenError::Missing(_) => FsError::read(path, std::io::ErrorKind::NotFound.into()),
        OpenError::NotAFile(_) => FsError::read(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        ),
        OpenError::TooBig { size, max, .. } => FsError::TooLarge {
            path: path.to_path_buf(),
            size,
            max,
        },
        OpenError::Io { source, .. } => FsError::read(path, source),
        e @ (OpenError::Symlink(_) | OpenError::Escaped(_)) => FsError::Refused(e.to_string()),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        FsError::read(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ),
        )
    })?;
    Ok(slice_lines(&text, line, limit))
}

/// Writes `content` to `path` (inside `root`, not one of `hidden`), creating parent folders.
pub async fn write_text(
    root: &Path,
    hidden: &[PathBuf],
    path: &Path,
    content: &str,
) -> Result<(), FsError> {
    let resolved = resolve(root, hidden, path)?;
    write_resolved_text(root, resolved, path, content).await
}

/// [`write_text`] once `path` is resolved: written as [`write_resolved`] writes (no symlink
/// followed at the end, the open file checked to be inside `root` before it is written).
async fn write_resolved_text(
    root: &Path,
    resolved: PathBuf,
    path: &Path,
    content: &str,
) -> Result<(), FsError> {
    let write_error = |source| FsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let (root, name, content) = (
        root.to_path_buf(),
        path.to_string_lossy().into_owned(),
        content.to_owned(),
    );
    let written = tokio::task::spawn_blocking(move || {
        write_resolved(&root, &resolved, &name, content.as_bytes())
    })
    .await
    .map_err(|e| write_error(std::io::Error::other(e)))?;
    written.map_err(|e| match e {
        WriteError::Path(e) => FsError::Path(e),
        WriteError::CreateDirs { source, .. } => FsError::CreateDir {
            path: path.to_path_buf(),
            source,
        },
        WriteError::Directory(_) => write_error(std::io::ErrorKind::IsADirectory.into()),
        WriteError::Io { source, .. } => write_error(source),
        e @ (WriteError::Symlink(_) | WriteError::NotAFile(_) | WriteError::Escaped(_)) => {
            FsError::Refused(e.to_string())
        }
    })
}

/// Lines `line..line+limit` (1-based) of `text`, keeping line endings.
fn slice_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn line_slices_are_one_based() {
        let text = "a\nb\nc\nd";
        assert_eq!(slice_lines(text, None, None), text);
        assert_eq!(slice_lines(text, Some(2), Some(2)), "b\nc\n");
        assert_eq!(slice_lines(text, Some(4), None), "d");
        assert_eq!(slice_lines(text, None, Some(1)), "a\n");
        assert_eq!(slice_lines(text, Some(9), None), "");
    }

    #[tokio::test]
    async fn reads_and_writes_stay_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        write_text(&root, &[], Path::new("sub/a.txt"), "hi\n")
            .await
            .unwrap();
        assert_eq!(
            read_text(&root, &[], Path::new("sub/a.txt"), None, None)
                .await
                .unwrap(),
            "hi\n"
        );
        let abs = root.join("sub/a.txt");
        assert_eq!(
            read_text(&root, &[], &abs, None, None).await.unwrap(),
            "hi\n"
        );
        for bad in ["../secret", "sub/../../secret"] {
            let err = read_text(&root, &[], Path::new(bad), None, None)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains("refused"), "{bad}: {err}");
            assert!(write_text(&root, &[], Path::new(bad), "x").await.is_err());
        }
        let err = read_text(&root, &[], &dir.path().join("secret"), None, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused"), "{err}");
        std::os::unix::fs::symlink(dir.path(), root.join("link")).unwrap();
        let err = read_text(&root, &[], Path::new("link/secret"), None, None)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused"), "{err}");
        assert!(
            write_text(&root, &[], Path::new("link/new"), "x")
                .await
                .is_err()
        );
        assert!(!dir.path().join("new").exists());
    }

    #[tokio::test]
    async fn a_missing_file_is_resource_not_found_and_a_refusal_invalid_params() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_text(dir.path(), &[], Path::new("nope.txt"), None, None)
            .await
            .unwrap_err();
        assert!(matches!(missing, FsError::NotFound { .. }), "{missing:?}");
        assert_eq!(missing.code(), ErrorCode::RESOURCE_NOT_FOUND);
        assert!(
            missing.to_string().starts_with("cannot read nope.txt: "),
            "{missing}"
        );
        let refused = read_text(dir.path(), &[], Path::new("../x"), None, None)
            .await
            .unwrap_err();
        assert!(matches!(
            refused,
            FsError::Path(PathError::OutsideWorkspace { .. })
        ));
        assert_eq!(refused.code(), ErrorCode::INVALID_PARAMS);
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        let folder = read_text(dir.path(), &[], Path::new("folder"), None, None)
            .await
            .unwrap_err();
        assert_eq!(folder.code(), ErrorCode::INVALID_PARAMS, "{folder:?}");
    }

    /// The race made deterministic: resolved, swapped for a link out (the file itself, or
    /// a folder on the way), then read and written. The old `read_text`/`write_text` used
    /// `tokio::fs` after the check (following the link): the secret was read, then
    /// overwritten.
    #[tokio::test]
    async fn files_swapped_for_links_out_after_the_check_are_neither_read_nor_written() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("x"), "plain").unwrap();
        let x = resolve_in_workspace(dir.path(), "x").unwrap();
        let in_sub = resolve_in_workspace(dir.path(), "sub/secret").unwrap();
        std::fs::remove_file(dir.path().join("x")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("x")).unwrap();
        std::fs::rename(dir.path().join("sub"), dir.path().join("sub.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
        for (resolved, given) in [(x, "x"), (in_sub, "sub/secret")] {
            let err =
                read_resolved_text(dir.path(), resolved.clone(), Path::new(given), None, None)
                    .await
                    .unwrap_err();
            assert!(matches!(err, FsError::Refused(_)), "{err:?}");
            assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
            assert!(
                err.to_string().starts_with(&format!("refused: {given} ")),
                "{err}"
            );
            let err = write_resolved_text(dir.path(), resolved, Path::new(given), "PWNED")
                .await
                .unwrap_err();
            assert!(matches!(err, FsError::Refused(_)), "{err:?}");
            assert!(
                !err.to_string().contains(outside.path().to_str().unwrap()),
                "{err}"
            );
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "SECRET");
    }

    #[tokio::test]
    async fn a_link_that_stays_inside_is_read_and_written_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.txt"), "old").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("alias")).unwrap();
        write_text(dir.path(), &[], Path::new("alias"), "new\n")
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("real.txt")).unwrap(),
            "new\n"
        );
        assert_eq!(
            read_text(dir.path(), &[], Path::new("alias"), None, None)
                .await
                .unwrap(),
            "new\n"
        );
    }

    #[tokio::test]
    async fn chelas_own_files_are_refused_even_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let store = home.join(".chela/store");
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("db"), "rows").unwrap();
        let token = home.join(".chela/store.rpc");
        std::fs::write(&token, "secret-token").unwrap();
        let config = home.join(".chela/config.toml");
        std::fs::write(&config, "[rpc]").unwrap();
        std::fs::write(home.join("notes.txt"), "fine").unwrap();
        std::os::unix::fs::symlink(home.join(".chela"), home.join("alias")).unwrap();
        let hidden = vec![store.clone(), token.clone(), config.clone()];
        for asked in [
            ".chela/store",
            ".chela/store/db",
            ".chela/store.rpc",
            ".chela/config.toml",
            "alias/config.toml",
            "alias/store/db",
            "./.chela/../.chela/store.rpc",
        ] {
            let err = read_text(home, &hidden, Path::new(asked), None, None)
                .await
                .unwrap_err();
            assert!(matches!(err, FsError::Hidden { .. }), "{asked}: {err:?}");
            assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
            let text = err.to_string();
            assert!(text.contains(asked), "{text}");
            assert!(!text.contains(&*home.to_string_lossy()), "{text}");
        }
        let abs = token.to_string_lossy().into_owned();
        let err = read_text(home, &hidden, Path::new(&abs), None, None)
            .await
            .unwrap_err();
        assert!(matches!(err, FsError::Hidden { .. }), "{err:?}");
        for asked in [".chela/store/new", ".chela/config.toml", "alias/store.rpc"] {
            let err = write_text(home, &hidden, Path::new(asked), "x")
                .await
                .unwrap_err();
            assert!(matches!(err, FsError::Hidden { .. }), "{asked}: {err:?}");
        }
        assert!(!store.join("new").exists());
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "[rpc]");
        assert_eq!(std::fs::read_to_string(&token).unwrap(), "secret-token");
        assert_eq!(
            read_text(home, &hidden, Path::new("notes.txt"), None, None)
                .await
                .unwrap(),
            "fine"
        );
        write_text(home, &hidden, Path::new(".chela/other.txt"), "ok")
            .await
            .unwrap();
    }
}
