//! `ls`: the entries of a directory, sorted, directories marked with a trailing `/`.

use std::path::Path;

use serde_json::{Value, json};

use super::paths::resolve_in_workspace;
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// Most entries listed; the rest are counted.
pub const MAX_ENTRIES: usize = 500;

/// Lists a directory in the workspace: `{path?}` (default `.`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

impl Tool for LsTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ls".to_string(),
            description: "List a directory in the workspace, sorted by name; directories end \
                          with /."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory, relative to the workspace (default .)"}
                }
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let requested = match parse_args(&args, |m| {
                Ok(args::optional_str(m, "path")?.unwrap_or(".").to_string())
            }) {
                Ok(p) => p,
                Err(out) => return out,
            };
            match resolve_in_workspace(&ctx.workspace, &requested) {
                Ok(path) => list(&path, &requested).await,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

async fn list(path: &Path, shown: &str) -> ToolOutput {
    let mut dir = match tokio::fs::read_dir(path).await {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error(format!("no such directory: {shown}"));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return ToolOutput::error(format!("{shown} is a file, not a directory; use read"));
        }
        Err(e) => return ToolOutput::error(format!("cannot list {shown}: {e}")),
    };
    let mut entries = Vec::new();
    loop {
        let entry = match dir.next_entry().await {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(e) => return ToolOutput::error(format!("cannot list {shown}: {e}")),
        };
        let mut name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = match entry.file_type().await {
            Ok(t) if t.is_symlink() => tokio::fs::metadata(entry.path())
                .await
                .is_ok_and(|m| m.is_dir()),
            Ok(t) => t.is_dir(),
            Err(_) => false,
        };
        if is_dir {
            name.push('/');
        }
        entries.push(name);
    }
    if entries.is_empty() {
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    entries.sort();
    let rest = entries.len().saturating_sub(MAX_ENTRIES);
    entries.truncate(MAX_ENTRIES);
    let mut text = entries.join("\n");
    if rest > 0 {
        text.push_str(&format!("\n[... {rest} more entries not shown]"));
    }
    ToolOutput::ok(text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use crate::agent::tools::test_support::ctx;

    #[tokio::test]
    async fn lists_sorted_with_dir_markers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.txt"), "").unwrap();
        std::fs::write(dir.path().join("a.txt"), "").unwrap();
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::create_dir(dir.path().join("Z")).unwrap();
        std::fs::write(dir.path().join("c/inner"), "").unwrap();
        let out = LsTool.call(json!({}), &ctx(dir.path())).await;
        assert_eq!(out, ToolOutput::ok("Z/\na.txt\nb.txt\nc/"));
        let out = LsTool.call(json!({"path": "c"}), &ctx(dir.path())).await;
        assert_eq!(out, ToolOutput::ok("inner"));
    }

    #[tokio::test]
    async fn caps_entries_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..510 {
            std::fs::write(dir.path().join(format!("f{i:04}")), "").unwrap();
        }
        let out = LsTool.call(json!({"path": "."}), &ctx(dir.path())).await;
        assert_eq!(out.text.lines().count(), MAX_ENTRIES + 1);
        assert!(out.text.ends_with("[... 10 more entries not shown]"));
        assert!(out.text.starts_with("f0000\nf0001\n"));
    }

    #[tokio::test]
    async fn missing_and_outside_paths_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = LsTool.call(json!({"path": "nope"}), &ctx(dir.path())).await;
        assert_eq!(out, ToolOutput::error("no such directory: nope"));
        let out = LsTool.call(json!({"path": ".."}), &ctx(dir.path())).await;
        assert!(out.is_error && out.text.contains("outside the workspace"));
    }
}
