//! The client's file service: `fs/read_text_file` and `fs/write_text_file`, confined to the
//! session's folder (`..`, absolute paths elsewhere and symlink escapes refused).

use std::path::Path;

use crate::agent::tools::paths::resolve_in_workspace;

/// Most bytes one read returns (an agent asking for more gets an error, not a huge reply).
const MAX_READ_BYTES: u64 = 8 * 1024 * 1024;

/// Reads `path` (inside `root`), optionally from 1-based `line` for `limit` lines.
pub async fn read_text(
    root: &Path,
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, String> {
    let resolved = resolve_in_workspace(root, &path.to_string_lossy())?;
    let size = tokio::fs::metadata(&resolved)
        .await
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if size > MAX_READ_BYTES {
        return Err(format!(
            "{} is {size} bytes; the most one read returns is {MAX_READ_BYTES}",
            path.display()
        ));
    }
    let text = tokio::fs::read_to_string(&resolved)
        .await
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(slice_lines(&text, line, limit))
}

/// Writes `content` to `path` (inside `root`), creating parent folders.
pub async fn write_text(root: &Path, path: &Path, content: &str) -> Result<(), String> {
    let resolved = resolve_in_workspace(root, &path.to_string_lossy())?;
    if let Some(parent) = resolved.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    tokio::fs::write(&resolved, content)
        .await
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
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
        write_text(&root, Path::new("sub/a.txt"), "hi\n")
            .await
            .unwrap();
        assert_eq!(
            read_text(&root, Path::new("sub/a.txt"), None, None)
                .await
                .unwrap(),
            "hi\n"
        );
        let abs = root.join("sub/a.txt");
        assert_eq!(read_text(&root, &abs, None, None).await.unwrap(), "hi\n");
        for bad in ["../secret", "sub/../../secret"] {
            let err = read_text(&root, Path::new(bad), None, None)
                .await
                .unwrap_err();
            assert!(err.contains("refused"), "{bad}: {err}");
            assert!(write_text(&root, Path::new(bad), "x").await.is_err());
        }
        let err = read_text(&root, &dir.path().join("secret"), None, None)
            .await
            .unwrap_err();
        assert!(err.contains("refused"), "{err}");
        std::os::unix::fs::symlink(dir.path(), root.join("link")).unwrap();
        let err = read_text(&root, Path::new("link/secret"), None, None)
            .await
            .unwrap_err();
        assert!(err.contains("refused"), "{err}");
        assert!(write_text(&root, Path::new("link/new"), "x").await.is_err());
        assert!(!dir.path().join("new").exists());
    }
}
