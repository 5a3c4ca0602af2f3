//! `memory_get`: lines of one memory file, `MEMORY.md` or a file under `memory/`.

use std::path::{Component, Path};

use serde_json::{Value, json};

use super::index::{MEMORY_DIR, MEMORY_FILE};
use crate::agent::provider::{BoxFuture, ToolSpec};
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
    let text = match tokio::fs::read(&path).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error(format!("no such memory file: {}", a.path));
        }
        Err(e) => return ToolOutput::error(format!("cannot read {}: {e}", a.path)),
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
