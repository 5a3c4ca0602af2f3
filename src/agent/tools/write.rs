//! `write`: create or overwrite a file, creating parent directories inside the workspace.

use std::path::Path;

use serde_json::{Value, json};

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
                Ok(path) => write(&path, &requested, content.as_bytes()).await,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

async fn write(path: &Path, shown: &str, content: &[u8]) -> ToolOutput {
    if tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir()) {
        return ToolOutput::error(format!("{shown} is a directory; give a file path"));
    }
    if let Some(parent) = path.parent()
        && let Err(e) = tokio::fs::create_dir_all(parent).await
    {
        return ToolOutput::error(format!("cannot create the directories of {shown}: {e}"));
    }
    match tokio::fs::write(path, content).await {
        Ok(()) => ToolOutput::ok(format!("wrote {} bytes to {shown}", content.len())),
        Err(e) => ToolOutput::error(format!("cannot write {shown}: {e}")),
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
}
