//! The RPC's discovery file, `<store.path>.rpc`: written by a running gateway so that the
//! local `chela` commands, which find the store in use, know where its RPC listens (also
//! with `listen = "...:0"`), when the gateway made its own token, what it is, and always the
//! operator token that methods changing who may talk to the bot need. Created readable by
//! this user only (and out of reach of the exec sandbox); removed at shutdown.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the discovery file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// The address the RPC listens on (the real port when `:0` was configured).
    pub address: String,
    /// The gateway's process id.
    pub pid: u32,
    /// The token, only when the gateway made it (no `rpc.token` configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The operator token: made at each start, presented by the local `chela` commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_token: Option<String>,
}

/// The discovery file of the store at `store_path`.
pub fn path_for(store_path: &Path) -> PathBuf {
    crate::config::discovery_path_for(store_path)
}

/// Writes `discovery` to `path`, readable and writable by this user only.
pub fn write(path: &Path, discovery: &Discovery) -> std::io::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string(discovery).map_err(std::io::Error::other)?;
    // A stale file of a crashed gateway may have other permissions: start fresh.
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// Reads the discovery file at `path`; `None` when there is none (or it is unreadable).
pub fn read(path: &Path) -> Option<Discovery> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Removes the discovery file at `path` when this process wrote it.
pub fn remove(path: &Path) {
    if read(path).is_some_and(|d| d.pid == std::process::id()) {
        let _ = std::fs::remove_file(path);
    }
}

/// A new random token (256 bits, hex).
pub fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn written_for_this_user_only_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("data"));
        assert_eq!(path, dir.path().join("data.rpc"));
        let d = Discovery {
            address: "127.0.0.1:4000".into(),
            pid: std::process::id(),
            token: Some(new_token()),
            operator_token: Some(new_token()),
        };
        write(&path, &d).unwrap();
        write(&path, &d).unwrap();
        assert_eq!(read(&path), Some(d));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        remove(&path);
        assert!(read(&path).is_none());
    }

    #[test]
    fn another_process_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.rpc");
        let d = Discovery {
            address: "127.0.0.1:1".into(),
            pid: std::process::id().wrapping_add(1),
            token: None,
            operator_token: None,
        };
        write(&path, &d).unwrap();
        remove(&path);
        assert_eq!(read(&path), Some(d));
        assert_eq!(new_token().len(), 64);
    }
}
