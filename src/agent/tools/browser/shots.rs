//! Screenshots are kept in the workspace (`browser/<session>-<time>-<n>.jpg`), written
//! beneath it without following links, so the model's image block names a file the file
//! tools reach. The newest [`KEEP`] stay; older ones are removed as new ones come.

use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::BrowserError;
use crate::agent::tools::beneath;

/// The folder, in the workspace, screenshots go to.
pub const FOLDER: &str = "browser";
/// Screenshots kept in it.
pub const KEEP: usize = 50;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Writes `jpeg` into the workspace; its path relative to the workspace.
pub async fn save(
    workspace: &Path,
    session_key: &str,
    jpeg: &[u8],
) -> Result<String, BrowserError> {
    let safe: String = session_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name = format!(
        "{safe}-{stamp:013}-{:06}.jpg",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let root = workspace.to_path_buf();
    let bytes = jpeg.to_vec();
    let file = name.clone();
    tokio::task::spawn_blocking(move || -> Result<(), BrowserError> {
        let root = std::fs::canonicalize(&root).map_err(BrowserError::io)?;
        let dir = beneath::open_dir(&root, Path::new(FOLDER), true)
            .map_err(|e| BrowserError::Io(e.to_string()))?;
        let mut out =
            beneath::open_for_writing(&dir, OsStr::new(&file), true).map_err(BrowserError::io)?;
        std::io::Write::write_all(&mut out, &bytes).map_err(BrowserError::io)?;
        prune(&dir);
        Ok(())
    })
    .await
    .map_err(|e| BrowserError::Io(e.to_string()))??;
    Ok(format!("{FOLDER}/{name}"))
}

/// Removes all but the newest [`KEEP`] screenshots of the open folder (by modification
/// time; read through the open folder, no link followed).
fn prune(dir: &std::os::fd::OwnedFd) {
    let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
        return;
    };
    let mut shots: Vec<(std::time::SystemTime, std::ffi::OsString)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| Path::new(&e.file_name()).extension() == Some(OsStr::new("jpg")))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.file_name())))
        .collect();
    if shots.len() <= KEEP {
        return;
    }
    shots.sort();
    for (_, name) in &shots[..shots.len() - KEEP] {
        let _ = beneath::remove_in(dir, name);
    }
}
