//! The `--log FILE` of `fake-mcp-server`: one line per event, appended, so tests can count
//! starts and calls across restarts of the process.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::handler::{McpEvent, Observer};

/// Appends `line` and a newline to `path` in one write (creating the file).
pub fn append_line(path: &Path, line: &str) -> io::Result<()> {
    let mut file = open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// An [`Observer`] that appends each event's line to `path` (errors go to stderr).
pub fn file_observer(path: &Path) -> io::Result<Observer> {
    let file = Mutex::new(open(path)?);
    Ok(Arc::new(move |event: &McpEvent| {
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = file.write_all(format!("{event}\n").as_bytes()) {
            eprintln!("fake-mcp-server: cannot write the log: {error}");
        }
    }))
}

/// If `path` holds a number above 0, writes it back less one and says so: this start is to
/// fail. A missing file or another content: `false`.
pub fn take_fail_start(path: &Path) -> io::Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error),
    };
    match text.trim().parse::<u64>() {
        Ok(left) if left > 0 => {
            std::fs::write(path, format!("{}\n", left - 1))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observer_appends_lines_and_fail_starts_count_down() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        append_line(&log, "start 1").unwrap();
        let observer = file_observer(&log).unwrap();
        observer(&McpEvent::Received("initialize".into()));
        observer(&McpEvent::Call("echo".into()));
        observer(&McpEvent::Cancelled("4".into()));
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "start 1\ninitialize\ncall echo\ncancelled 4\n");

        let fails = dir.path().join("fails");
        assert!(!take_fail_start(&fails).unwrap());
        std::fs::write(&fails, "2").unwrap();
        assert!(take_fail_start(&fails).unwrap());
        assert!(take_fail_start(&fails).unwrap());
        assert!(!take_fail_start(&fails).unwrap());
        assert_eq!(std::fs::read_to_string(&fails).unwrap().trim(), "0");
    }
}
