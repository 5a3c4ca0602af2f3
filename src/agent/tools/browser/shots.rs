//! Screenshots are kept in the workspace (`browser/<session>-<n>.png`), written beneath it
//! without following links, so the model's image block names a file the file tools reach.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::BrowserError;
use crate::agent::tools::beneath;

/// The folder, in the workspace, screenshots go to.
pub const FOLDER: &str = "browser";

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Writes `png` into the workspace; its path relative to the workspace.
pub async fn save(workspace: &Path, session_key: &str, png: &[u8]) -> Result<String, BrowserError> {
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
        "{safe}-{stamp}-{}.png",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let root = workspace.to_path_buf();
    let bytes = png.to_vec();
    let file = name.clone();
    tokio::task::spawn_blocking(move || -> Result<(), BrowserError> {
        let root = std::fs::canonicalize(&root).map_err(BrowserError::io)?;
        let dir = beneath::open_dir(&root, Path::new(FOLDER), true)
            .map_err(|e| BrowserError::Io(e.to_string()))?;
        let mut out = beneath::open_for_writing(&dir, std::ffi::OsStr::new(&file), true)
            .map_err(BrowserError::io)?;
        std::io::Write::write_all(&mut out, &bytes).map_err(BrowserError::io)
    })
    .await
    .map_err(|e| BrowserError::Io(e.to_string()))??;
    Ok(format!("{FOLDER}/{name}"))
}
