//! The `[log] file` writer: appends to a file (mode 0600) and rotates it by size, keeping a
//! number of old files (`FILE.1` the newest ... `FILE.<keep>` the oldest).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A log file rotated when it would grow past `max_bytes`.
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    file: File,
    /// Bytes in the current file.
    size: u64,
}

impl RotatingFile {
    /// Opens `path` for appending (made with its folder when missing).
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<RotatingFile> {
        let file = super::open_log(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(1),
            keep,
            file,
            size,
        })
    }

    /// `FILE.n`.
    fn numbered(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        name.into()
    }

    /// Moves the files one number up (the oldest goes) and starts an empty file.
    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        match self.keep {
            0 => remove_if_there(&self.path)?,
            keep => {
                remove_if_there(&self.numbered(keep))?;
                for n in (1..keep).rev() {
                    rename_if_there(&self.numbered(n), &self.numbered(n + 1))?;
                }
                rename_if_there(&self.path, &self.numbered(1))?;
            }
        }
        self.file = super::open_log(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn rename_if_there(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One log line is one write: a line is never split between two files.
        if self.size > 0
            && self.size + buf.len() as u64 > self.max_bytes
            && let Err(e) = self.rotate()
        {
            // Go on in a fresh file at the path (made again, with its folder, if it was
            // removed), counting from 0: a rotation that fails is tried again only after
            // another `max_bytes`, not at every line.
            self.file = super::open_log(&self.path).map_err(|_| e)?;
            self.size = 0;
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn read(path: PathBuf) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn rotates_by_size_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/chela.log");
        let mut log = RotatingFile::open(&path, 10, 2).unwrap();
        for line in ["one\n", "two\n", "three\n", "four\n", "five\n", "six\n"] {
            log.write_all(line.as_bytes()).unwrap();
        }
        log.flush().unwrap();
        let at = |suffix: &str| {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        };
        // Files of at most 10 bytes: one+two, three, four+five, six; the first is gone.
        assert_eq!(read(path.clone()), "six\n");
        assert_eq!(read(at(".1")), "four\nfive\n");
        assert_eq!(read(at(".2")), "three\n");
        assert!(!at(".3").exists(), "only two old files are kept");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn keep_zero_empties_the_file_and_reopening_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chela.log");
        let mut log = RotatingFile::open(&path, 8, 0).unwrap();
        log.write_all(b"abcdef\n").unwrap();
        log.write_all(b"ghij\n").unwrap();
        assert_eq!(read(path.clone()), "ghij\n");
        drop(log);
        let mut log = RotatingFile::open(&path, 8, 0).unwrap();
        log.write_all(b"k\n").unwrap();
        assert_eq!(read(path.clone()), "ghij\nk\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_removed_log_folder_is_made_again_at_the_next_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/chela.log");
        let mut log = RotatingFile::open(&path, 12, 2).unwrap();
        log.write_all(b"0123456789").unwrap();
        std::fs::remove_dir_all(dir.path().join("logs")).unwrap();
        log.write_all(b"after\n").unwrap();
        log.write_all(b"more\n").unwrap();
        assert_eq!(read(path), "after\nmore\n");
    }
}
