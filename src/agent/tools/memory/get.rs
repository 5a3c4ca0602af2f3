//! `memory_get`: lines of one memory file, `MEMORY.md` or a file under `memory/`.

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::index::{MEMORY_DIR, MEMORY_FILE};
use crate::agent::provider::{BoxFuture, ToolSpec};
use crate::agent::tools::confined::{OpenError, read_resolved};
use crate::agent::tools::paths::resolve_in_workspace;
use crate::agent::tools::{Tool, ToolContext, ToolOutput, args, parse_args};

/// Lines read unless `lines` says otherwise.
pub const DEFAULT_LINES: u64 = 200;

/// Reads a memory file: `{path, from?, lines?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryGetTool;

struct GetArgs {
    path: String,
    from: u64,
    lines: u64,
}

impl Tool for MemoryGetTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_get".to_string(),
            description: "Read lines of a memory file (MEMORY.md or memory/*.md), e.g. around \
                          a memory_search result. Other files are refused."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "MEMORY.md or memory/..., relative to the workspace"},
                    "from": {"type": "integer", "minimum": 1, "description": "First line (1-based, default 1)"},
                    "lines": {"type": "integer", "minimum": 1, "description": "How many lines (default 200)"}
                },
                "required": ["path"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let parsed = parse_args(&args, |m| {
                Ok(GetArgs {
                    path: args::required_str(m, "path")?.to_string(),
                    from: args::optional_u64(m, "from")?.unwrap_or(1).max(1),
                    lines: args::optional_u64(m, "lines")?
                        .unwrap_or(DEFAULT_LINES)
                        .max(1),
                })
            });
            match parsed {
                Ok(a) => get(&a, &ctx.workspace, ctx.max_output_chars).await,
                Err(out) => out,
            }
        })
    }
}

async fn get(a: &GetArgs, workspace: &Path, max_chars: usize) -> ToolOutput {
    let path = match memory_path(workspace, &a.path) {
        Ok(path) => path,
        Err(refusal) => return ToolOutput::error(refusal),
    };
    let text = match read_memory(workspace, path, &a.path).await {
        Ok(text) => text,
        Err(refusal) => return ToolOutput::error(refusal),
    };
    let total = text.lines().count();
    let skip = usize::try_from(a.from - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(a.lines).unwrap_or(usize::MAX);
    let picked: Vec<&str> = text.lines().skip(skip).take(take).collect();
    let to = skip + picked.len();
    let body = crate::agent::tools::truncate::head_tail(&picked.join("\n"), max_chars);
    let mut out = json!({
        "path": a.path,
        "from": a.from,
        "to": to,
        "totalLines": total,
        "text": body,
    });
    if to < total {
        out["more"] = json!(format!("continue with from={}", to + 1));
    }
    ToolOutput::ok(out.to_string())
}

/// The text of memory file `path`, resolved for `requested` a moment ago, read as
/// [`read_resolved`] reads (no symlink followed at the end, the open file checked to be
/// inside the workspace), or what the agent reads instead.
async fn read_memory(workspace: &Path, path: PathBuf, requested: &str) -> Result<String, String> {
    let (workspace, name) = (workspace.to_path_buf(), requested.to_owned());
    let read =
        tokio::task::spawn_blocking(move || read_resolved(&workspace, &path, &name, u64::MAX))
            .await;
    match read {
        Ok(Ok(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Ok(Err(OpenError::Missing(_))) => Err(format!("no such memory file: {requested}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("cannot read {requested}: {e}")),
    }
}

/// The path of memory file `requested`, or why it is refused: it must resolve (symlinks
/// followed, inside the workspace) to `MEMORY.md` or a file under `memory/`.
pub fn memory_path(workspace: &Path, requested: &str) -> Result<std::path::PathBuf, String> {
    let resolved = resolve_in_workspace(workspace, requested).map_err(|e| e.to_string())?;
    let root = std::fs::canonicalize(workspace).map_err(|e| e.to_string())?;
    let rel = resolved.strip_prefix(&root).unwrap_or(Path::new(""));
    let mut parts = rel.components().map(|c| match c {
        Component::Normal(p) => p.to_str(),
        _ => None,
    });
    let first = parts.next().flatten();
    let more = parts.next().is_some();
    let allowed = match first {
        Some(MEMORY_FILE) => !more,
        Some(MEMORY_DIR) => more,
        _ => false,
    };
    if allowed {
        Ok(resolved)
    } else {
        Err(format!(
            "refused: {requested} is not a memory file; memory_get reads MEMORY.md and files \
             under memory/ (use read for other files)"
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    /// The race made deterministic: checked, swapped for a link out, then read. The old
    /// `get` read the checked path with `tokio::fs::read` (following the link) and showed
    /// the secret.
    #[tokio::test]
    async fn a_memory_file_swapped_for_a_link_out_after_the_check_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("config.toml");
        std::fs::write(&secret, "token = 'SECRET'").unwrap();
        std::fs::create_dir(dir.path().join("memory")).unwrap();
        std::fs::write(dir.path().join("memory/a.md"), "note").unwrap();
        let path = memory_path(dir.path(), "memory/a.md").unwrap();
        assert_eq!(
            read_memory(dir.path(), path.clone(), "memory/a.md").await,
            Ok("note".to_owned())
        );
        std::fs::remove_file(dir.path().join("memory/a.md")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("memory/a.md")).unwrap();
        let refused = read_memory(dir.path(), path, "memory/a.md").await;
        assert_eq!(refused, Err("refused: memory/a.md is a symlink".to_owned()));
    }

    #[tokio::test]
    async fn a_memory_file_linked_inside_the_workspace_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("memory")).unwrap();
        std::fs::write(dir.path().join("memory/real.md"), "one\ntwo").unwrap();
        std::os::unix::fs::symlink("real.md", dir.path().join("memory/alias.md")).unwrap();
        let a = GetArgs {
            path: "memory/alias.md".into(),
            from: 2,
            lines: 1,
        };
        let out = get(&a, dir.path(), 10_000).await;
        assert!(
            !out.is_error && out.text.contains("\"two\""),
            "{}",
            out.text
        );
    }
}
