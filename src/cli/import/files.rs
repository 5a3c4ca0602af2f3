//! Reading the files of an OpenClaw folder, which may be crafted: only regular files are
//! read (a symbolic link, a FIFO, a device or a socket is refused with an error naming the
//! file: never followed, never waited on), and never more than a limit, so neither
//! `/dev/zero` nor a FIFO nor a huge file can exhaust memory or hang the import.

use std::fs::FileType;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most read from a JSON file (`openclaw.json`, `sessions.json`, `*-allowFrom.json`).
pub const JSON_LIMIT: u64 = 16 << 20;
/// The most read from one JSONL transcript file.
pub const TRANSCRIPT_LIMIT: u64 = 256 << 20;

/// Why a file of the folder was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not a regular file.
    #[error(
        "{path} is {kind}, not a regular file: chela reads only regular files from an \
         OpenClaw folder (links are not followed)"
    )]
    NotRegular {
        /// The file.
        path: String,
        /// What it is (`a symbolic link`, `a FIFO`, ...).
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("{path} is larger than {} MiB, the most chela reads from it", limit >> 20)]
    TooLarge {
        /// The file.
        path: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// It could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// What a file type is, in words.
fn kind(file_type: &FileType) -> &'static str {
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

/// Whether `path` is there as a regular file: `false` when nothing is there; an error when
/// something else is (a link is not followed). For files another library opens by name
/// (SQLite's).
pub fn regular(path: &Path) -> Result<bool, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(true),
        Ok(meta) => Err(FileError::NotRegular {
            path: path.display().to_string(),
            kind: kind(&meta.file_type()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(FileError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The text of the regular file `path`, at most `limit` bytes; `None` when nothing is there.
/// Opened without following a link and without waiting (a FIFO's open would block), then
/// checked to be a regular file before anything is read.
pub fn read_text(path: &Path, limit: u64) -> Result<Option<String>, FileError> {
    let io = |source| FileError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(FileError::NotRegular {
                path: path.display().to_string(),
                kind: "a symbolic link",
            });
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.display().to_string(),
            kind: kind(&meta.file_type()),
        });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.display().to_string(),
            limit,
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_devices_are_refused_and_sizes_capped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.json");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_text(&file, 5).unwrap().as_deref(), Some("12345"));
        let err = read_text(&file, 4).unwrap_err().to_string();
        assert!(
            err.contains("a.json") && err.contains("larger than"),
            "{err}"
        );
        assert!(read_text(&dir.path().join("none"), 5).unwrap().is_none());
        assert!(!regular(&dir.path().join("none")).unwrap());

        let link = dir.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = read_text(&link, 5).unwrap_err().to_string();
        assert!(err.contains("zero.jsonl is a symbolic link"), "{err}");
        assert!(regular(&link).is_err());
        let err = read_text(Path::new("/dev/zero"), 5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a device"), "{err}");

        let fifo = dir.path().join("fifo.jsonl");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_text(&fifo, 5).unwrap_err().to_string();
        assert!(err.contains("fifo.jsonl is a FIFO"), "{err}");
        assert!(regular(&fifo).unwrap_err().to_string().contains("a FIFO"));
    }
}
