//! `write`: create or overwrite a file, creating parent directories inside the workspace.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::confined::{WriteError, write_resolved};
use super::paths::resolve_in_workspace;
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// Writes a file in the workspace: `{path, content}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

impl Tool for WriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".to_string(),
            description: "Create or overwrite a file in the workspace with the given content; \
                          missing parent directories are created."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace"},
                    "content": {"type": "string", "description": "The whole new content of the file"}
                },
                "required": ["path", "content"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let (requested, content) = match parse_args(&args, |m| {
                Ok((
                    args::required_str(m, "path")?.to_string(),
                    args::required_str(m, "content")?.to_string(),
                ))
            }) {
                Ok(a) => a,
                Err(out) => return out,
            };
            match resolve_in_workspace(&ctx.workspace, &requested) {
                Ok(path) => write(&ctx.workspace, path, requested, content.into_bytes()).await,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// Writes `content` to `path`, resolved for `shown` a moment ago, as
/// [`write_resolved`] writes (no symlink followed at the end, the open file checked to be
/// inside the workspace before anything is written).
async fn write(workspace: &Path, path: PathBuf, shown: String, content: Vec<u8>) -> ToolOutput {
    let workspace = workspace.to_path_buf();
    let len = content.len();
    let name = shown.clone();
    let done =
        tokio::task::spawn_blocking(move || write_resolved(&workspace, &path, &name, &content))
            .await;
    match done {
        Ok(Ok(())) => ToolOutput::ok(format!("wrote {len} bytes to {shown}")),
        Ok(Err(e)) => ToolOutput::error(write_refusal(&e, &shown)),
        Err(e) => ToolOutput::error(format!("cannot write {shown}: {e}")),
    }
}

/// What the agent reads when a write fails; names only the path it gave.
pub(super) fn write_refusal(e: &WriteError, shown: &str) -> String {
    match e {
        WriteError::Directory(_) => format!("{shown} is a directory; give a file path"),
        e => e.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use crate::agent::tools::test_support::ctx;

    #[tokio::test]
    async fn write_creates_parents_and_reports_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"path": "a/b/c.txt", "content": "héllo"});
        let out = WriteTool.call(args, &ctx(dir.path())).await;
        assert_eq!(out, ToolOutput::ok("wrote 6 bytes to a/b/c.txt"));
        let written = std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap();
        assert_eq!(written, "héllo");
        let args = json!({"path": "a/b/c.txt", "content": ""});
        let out = WriteTool.call(args, &ctx(dir.path())).await;
        assert_eq!(out, ToolOutput::ok("wrote 0 bytes to a/b/c.txt"));
    }

    #[tokio::test]
    async fn write_outside_or_onto_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        for path in ["../x.txt", "out/x.txt"] {
            let out = WriteTool
                .call(json!({"path": path, "content": "x"}), &ctx(dir.path()))
                .await;
            assert!(out.is_error, "{path}: {}", out.text);
        }
        assert!(!outside.path().join("x.txt").exists());
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let out = WriteTool
            .call(json!({"path": "d", "content": "x"}), &ctx(dir.path()))
            .await;
        assert!(out.is_error && out.text.contains("is a directory"));
    }

    #[tokio::test]
    async fn a_link_that_stays_inside_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.txt"), "old content").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("alias")).unwrap();
        let out = WriteTool
            .call(json!({"path": "alias", "content": "new"}), &ctx(dir.path()))
            .await;
        assert_eq!(out, ToolOutput::ok("wrote 3 bytes to alias"));
        let written = std::fs::read_to_string(dir.path().join("real.txt")).unwrap();
        assert_eq!(written, "new");
    }

    /// The race (a job swapping `x` for a link out between the check and the write) made
    /// deterministic: resolved, swapped, then written. The old `write` followed the link
    /// (`tokio::fs::write`) and overwrote the file outside.
    #[tokio::test]
    async fn a_file_swapped_for_a_link_out_after_the_check_is_not_written() {
        let (dir, _outside, secret, path) = super::super::test_support::swapped_for_link_out();
        let out = write(dir.path(), path, "x".into(), b"PWNED".to_vec()).await;
        assert_eq!(out, ToolOutput::error("refused: x is a symlink"));
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "token = 'SECRET'"
        );
    }
}
