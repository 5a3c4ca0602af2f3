//! Files chela itself reads from a workspace (the prompt's bootstrap files, workspace skills,
//! pictures for the model, downloaded voice notes), confined as the file tools are: the path
//! is resolved by [`resolve_in_workspace`] (a symlink may lead elsewhere inside the
//! workspace, never out of it), the file is opened without following a symlink at the end
//! (nor blocking on a FIFO), and the open file is checked: a regular file, and (where
//! `/proc/self/fd` tells) still inside the workspace, so a folder swapped for a symlink after
//! the check is caught. A file refused for leading out of the workspace is logged with a
//! warning naming the file as asked for, never where it leads, and is never read.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::beneath::{self, BeneathError};
use super::paths::{PathError, resolve_in_workspace};

/// Why a workspace file was not opened or read; the text names only the path as asked for.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Refused by the path rules: outside the workspace, through a symlink out of it,
    /// dangling, or the workspace itself is not usable.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Nothing there.
    #[error("{0} does not exist")]
    Missing(String),
    /// A symlink where a plain file was resolved a moment ago (swapped since).
    #[error("refused: {0} is a symlink")]
    Symlink(String),
    /// A folder, a device, a FIFO: not a regular file.
    #[error("{0} is not a regular file")]
    NotAFile(String),
    /// The open file is outside the workspace (a folder on the way swapped for a symlink).
    #[error("refused: {0} leads outside the workspace through a symlink")]
    Escaped(String),
    /// Larger than the caller reads.
    #[error("{name} is larger than {max} bytes")]
    TooBig {
        /// The file as asked for.
        name: String,
        /// Its size in bytes (as much as was read, when it grew while read).
        size: u64,
        /// The most the caller reads.
        max: u64,
    },
    /// The system refused to open or read it.
    #[error("cannot read {name}: {source}")]
    Io {
        /// The file as asked for.
        name: String,
        /// Why.
        source: std::io::Error,
    },
}

impl OpenError {
    /// Whether the file is simply not there (a missing prompt file is no news).
    pub fn is_missing(&self) -> bool {
        matches!(self, OpenError::Missing(_))
    }

    /// Whether it was refused for leading (or possibly leading) out of the workspace.
    pub fn is_escape(&self) -> bool {
        match self {
            OpenError::Path(e) => leads_out(e),
            OpenError::Symlink(_) | OpenError::Escaped(_) => true,
            _ => false,
        }
    }
}

/// Opens `requested` (relative to `workspace`, or absolute inside it) for reading, as the
/// module says: its real path, the open file and its metadata. Blocking.
pub fn open_in_workspace(
    workspace: &Path,
    requested: &str,
) -> Result<(PathBuf, File, Metadata), OpenError> {
    let path = resolve_in_workspace(workspace, requested).map_err(|e| {
        let e = OpenError::from(e);
        warn_if_escape(&e, workspace, requested);
        e
    })?;
    let (file, meta) = open_resolved(workspace, &path, requested)?;
    Ok((path, file, meta))
}

/// Opens `path`, which [`resolve_in_workspace`] answered for `requested` a moment ago, for
/// reading: without following a symlink at the end, a regular file, and (where
/// `/proc/self/fd` tells) still inside the workspace. Errors name only `requested`. Blocking.
pub fn open_resolved(
    workspace: &Path,
    path: &Path,
    requested: &str,
) -> Result<(File, Metadata), OpenError> {
    let opened = open_checked(workspace, path, requested);
    if let Err(e) = &opened {
        warn_if_escape(e, workspace, requested);
    }
    opened
}

/// Whether the resolver refused `e` for leading (or possibly leading) out of the workspace.
fn leads_out(e: &PathError) -> bool {
    matches!(
        e,
        PathError::OutsideWorkspace { .. }
            | PathError::SymlinkEscape { .. }
            | PathError::Unresolvable { .. }
    )
}

fn warn_if_escape(e: &OpenError, workspace: &Path, requested: &str) {
    if e.is_escape() {
        tracing::warn!(
            file = requested,
            workspace = %workspace.display(),
            "refused: a workspace file that leads outside the workspace is not read"
        );
    }
}

/// The bytes of `requested` (see [`open_in_workspace`]), refused when larger than
/// `max_bytes`. Blocking.
pub fn read_in_workspace(
    workspace: &Path,
    requested: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, OpenError> {
    let (_, file, meta) = open_in_workspace(workspace, requested)?;
    read_opened(file, &meta, requested, max_bytes)
}

/// The bytes of `path`, opened as [`open_resolved`] opens it, refused when larger than
/// `max_bytes`. Blocking.
pub fn read_resolved(
    workspace: &Path,
    path: &Path,
    requested: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, OpenError> {
    let (file, meta) = open_resolved(workspace, path, requested)?;
    read_opened(file, &meta, requested, max_bytes)
}

fn read_opened(
    file: File,
    meta: &Metadata,
    requested: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, OpenError> {
    if meta.len() > max_bytes {
        return Err(OpenError::TooBig {
            name: requested.to_owned(),
            size: meta.len(),
            max: max_bytes,
        });
    }
    let mut bytes = Vec::new();
    // A file growing after the check is cut at the limit (one byte more tells it grew).
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| OpenError::Io {
            name: requested.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > max_bytes {
        return Err(OpenError::TooBig {
            name: requested.to_owned(),
            size: bytes.len() as u64,
            max: max_bytes,
        });
    }
    Ok(bytes)
}

/// [`read_in_workspace`] as UTF-8 text (a file that is not UTF-8 is an error, as
/// `std::fs::read_to_string` says it).
pub fn read_text_in_workspace(
    workspace: &Path,
    requested: &str,
    max_bytes: u64,
) -> Result<String, OpenError> {
    let bytes = read_in_workspace(workspace, requested, max_bytes)?;
    String::from_utf8(bytes).map_err(|_| OpenError::Io {
        name: requested.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })
}

fn open_checked(
    workspace: &Path,
    path: &Path,
    requested: &str,
) -> Result<(File, Metadata), OpenError> {
    let name = || requested.to_owned();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.kind() {
            // `a.md/x` where `a.md` is a file: nothing there either.
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
                OpenError::Missing(name())
            }
            _ if source.raw_os_error() == Some(nix::libc::ELOOP) => OpenError::Symlink(name()),
            _ => OpenError::Io {
                name: name(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(|source| OpenError::Io {
        name: name(),
        source,
    })?;
    if !meta.is_file() {
        return Err(OpenError::NotAFile(name()));
    }
    if !opened_inside(workspace, &file)? {
        return Err(OpenError::Escaped(name()));
    }
    Ok((file, meta))
}

/// Whether the open `file` really is inside the workspace (Linux: `/proc/self/fd`;
/// elsewhere the check of the path before opening stands, and this says yes).
fn opened_inside(workspace: &Path, file: &File) -> Result<bool, PathError> {
    let root = std::fs::canonicalize(workspace).map_err(|source| PathError::Workspace {
        workspace: workspace.to_path_buf(),
        source,
    })?;
    Ok(opened_beneath(&root, file))
}

/// [`opened_inside`] against `root`, the workspace canonicalized before the open.
fn opened_beneath(root: &Path, file: &File) -> bool {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_or(true, |real| real.starts_with(root))
}

/// Why a workspace file was not written; the text names only the path as asked for.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Refused by the path rules (see [`OpenError::Path`]).
    #[error(transparent)]
    Path(#[from] PathError),
    /// The path is a folder.
    #[error("{0} is a directory")]
    Directory(String),
    /// A parent folder cannot be created.
    #[error("cannot create the directories of {name}: {source}")]
    CreateDirs {
        /// The file as asked for.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A symlink where a plain file (or nothing) was resolved a moment ago (swapped since).
    #[error("refused: {0} is a symlink")]
    Symlink(String),
    /// A FIFO, a device: not a regular file.
    #[error("{0} is not a regular file")]
    NotAFile(String),
    /// The open file is outside the workspace (a folder on the way swapped for a symlink);
    /// nothing was written to it.
    #[error("refused: {0} leads outside the workspace through a symlink")]
    Escaped(String),
    /// The system refused to open or write it.
    #[error("cannot write {name}: {source}")]
    Io {
        /// The file as asked for.
        name: String,
        /// Why.
        source: std::io::Error,
    },
}

impl WriteError {
    /// Whether it was refused for leading (or possibly leading) out of the workspace.
    pub fn is_escape(&self) -> bool {
        match self {
            WriteError::Path(e) => leads_out(e),
            WriteError::Symlink(_) | WriteError::Escaped(_) => true,
            _ => false,
        }
    }
}

/// Writes `content` to `requested` (relative to `workspace`, or absolute inside it),
/// creating missing parent folders, as [`write_resolved`] writes. Blocking.
pub fn write_in_workspace(
    workspace: &Path,
    requested: &str,
    content: &[u8],
) -> Result<(), WriteError> {
    let path = resolve_in_workspace(workspace, requested)?;
    write_resolved(workspace, &path, requested, content)
}

/// Writes `content` to `path`, which [`resolve_in_workspace`] answered for `requested` a
/// moment ago: missing parent folders are created and the file is opened (created if
/// missing, not truncated yet) one step at a time beneath the workspace without following
/// any link ([`super::beneath`]), so a folder swapped for a link at any moment is refused
/// and nothing is made outside; only once the open file is known to be a regular file
/// inside the workspace is it emptied and written. Errors name only `requested`. Blocking.
pub fn write_resolved(
    workspace: &Path,
    path: &Path,
    requested: &str,
    content: &[u8],
) -> Result<(), WriteError> {
    let written = open_and_write(workspace, path, requested, content);
    if let Err(e) = &written
        && e.is_escape()
    {
        tracing::warn!(
            file = requested,
            workspace = %workspace.display(),
            "refused: a workspace file that leads outside the workspace is not written"
        );
    }
    written
}

/// Opens `path` for writing beneath `root`, the workspace canonicalized once (see
/// [`write_resolved`]).
fn open_beneath(root: &Path, path: &Path, requested: &str) -> Result<File, WriteError> {
    let name = || requested.to_owned();
    if path == root {
        return Err(WriteError::Directory(name()));
    }
    let (folder, file_name) =
        beneath::split(root, path).map_err(|_| WriteError::Escaped(name()))?;
    let dir = beneath::open_dir(root, &folder, true).map_err(|e| match e {
        BeneathError::Io(source) => WriteError::CreateDirs {
            name: name(),
            source,
        },
        BeneathError::Outside | BeneathError::Link => WriteError::Escaped(name()),
    })?;
    beneath::open_for_writing(&dir, &file_name, false).map_err(|source| match source.kind() {
        std::io::ErrorKind::IsADirectory => WriteError::Directory(name()),
        _ if source.raw_os_error() == Some(nix::libc::ELOOP) => WriteError::Symlink(name()),
        // A FIFO nobody reads.
        _ if source.raw_os_error() == Some(nix::libc::ENXIO) => WriteError::NotAFile(name()),
        _ => WriteError::Io {
            name: name(),
            source,
        },
    })
}

fn open_and_write(
    workspace: &Path,
    path: &Path,
    requested: &str,
    content: &[u8],
) -> Result<(), WriteError> {
    use std::io::Write;
    let name = || requested.to_owned();
    let root = std::fs::canonicalize(workspace).map_err(|source| PathError::Workspace {
        workspace: workspace.to_path_buf(),
        source,
    })?;
    let mut file = open_beneath(&root, path, requested)?;
    let meta = file.metadata().map_err(|source| WriteError::Io {
        name: name(),
        source,
    })?;
    if !meta.is_file() {
        return Err(WriteError::NotAFile(name()));
    }
    if !opened_beneath(&root, &file) {
        return Err(WriteError::Escaped(name()));
    }
    let io = |source: std::io::Error| WriteError::Io {
        name: name(),
        source,
    };
    file.set_len(0).map_err(io)?;
    file.write_all(content).map_err(io)?;
    Ok(())
}

#[cfg(test)]
#[path = "confined_tests.rs"]
mod tests;
