//! `memory_search` and `memory_get`: the agent's durable notes in its workspace, `MEMORY.md`
//! and `memory/**/*.md` (daily notes `memory/YYYY-MM-DD.md`). The agent writes them with
//! `write` and `edit`; these tools find and read them. Search is BM25 over chunks of a few
//! hundred words (see [`chunk`]), each hit citing its file and lines (see [`index`]).

pub mod chunk;
pub mod get;
pub mod index;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};
use index::Index;

/// Results of a search unless `maxResults` says otherwise.
pub const DEFAULT_RESULTS: u64 = 6;
/// Most results of one search.
pub const MAX_RESULTS: u64 = 50;
/// Most chars of a result's snippet.
pub const SNIPPET_CHARS: usize = 700;

/// The indexes of the workspaces searched so far, by canonical workspace path.
pub type Indexes = Arc<Mutex<HashMap<PathBuf, Index>>>;

/// Both memory tools, sharing one set of indexes.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    let indexes = Indexes::default();
    vec![
        Arc::new(MemorySearchTool { indexes }),
        Arc::new(get::MemoryGetTool),
    ]
}

/// `memory_search`: `{query, maxResults?, minScore?}`, ranked chunks of the memory files.
#[derive(Default)]
pub struct MemorySearchTool {
    /// The indexes, refreshed at each call.
    pub indexes: Indexes,
}

struct SearchArgs {
    query: String,
    max_results: usize,
    min_score: f32,
}

impl Tool for MemorySearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_search".to_string(),
            description: "Search your memory files (MEMORY.md and memory/*.md in the workspace) \
                          before answering about earlier work, decisions, dates, people, \
                          preferences or todos. Returns the best matching snippets, each with \
                          its path and lines; read more with memory_get."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for (words, names, dates)"},
                    "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Most results (default 6)"},
                    "minScore": {"type": "number", "minimum": 0, "description": "Least BM25 score of a result (default 0)"}
                },
                "required": ["query"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let parsed = parse_args(&args, |m| {
                let query = args::required_str(m, "query")?.trim().to_owned();
                if query.is_empty() {
                    return Err(args::ArgError::invalid("argument `query` is empty"));
                }
                let max = args::optional_u64(m, "maxResults")?.unwrap_or(DEFAULT_RESULTS);
                Ok(SearchArgs {
                    query,
                    max_results: usize::try_from(max.clamp(1, MAX_RESULTS)).unwrap_or(6),
                    min_score: args::optional_f64(m, "minScore")?.unwrap_or(0.0) as f32,
                })
            });
            let a = match parsed {
                Ok(a) => a,
                Err(out) => return out,
            };
            let root = match std::fs::canonicalize(&ctx.workspace) {
                Ok(root) => root,
                Err(e) => {
                    return ToolOutput::error(format!("the workspace is not usable: {e}"));
                }
            };
            let indexes = Arc::clone(&self.indexes);
            let max_chars = ctx.max_output_chars;
            let work = tokio::task::spawn_blocking(move || search(&indexes, root, &a, max_chars));
            match work.await {
                Ok(out) => out,
                Err(e) => ToolOutput::error(format!("memory search failed: {e}")),
            }
        })
    }
}

/// Refreshes the index of `root` and runs the search; the result is JSON text.
fn search(indexes: &Indexes, root: PathBuf, a: &SearchArgs, max_chars: usize) -> ToolOutput {
    let mut indexes = indexes.lock().unwrap_or_else(PoisonError::into_inner);
    let index = indexes.entry(root.clone()).or_default();
    index.refresh(&root);
    let hits = index.search(&a.query, a.max_results, a.min_score);
    let results: Vec<Value> = hits
        .iter()
        .map(|h| {
            json!({
                "path": h.path,
                "startLine": h.start_line,
                "endLine": h.end_line,
                "score": (f64::from(h.score) * 1000.0).round() / 1000.0,
                "snippet": snippet(&h.text),
                "citation": format!("{}#L{}-L{}", h.path, h.start_line, h.end_line),
            })
        })
        .collect();
    let mut out = json!({ "results": results });
    if !index.refused.is_empty() {
        out["skipped"] = json!(index.refused);
    }
    if hits.is_empty() && index.chunk_count() == 0 {
        out["note"] =
            json!("No memory files yet: write notes to MEMORY.md or memory/YYYY-MM-DD.md.");
    }
    ToolOutput::ok(super::truncate::head_tail(&out.to_string(), max_chars))
}

/// The first [`SNIPPET_CHARS`] chars of `text`, with `...` when cut.
fn snippet(text: &str) -> String {
    let mut out: String = text.chars().take(SNIPPET_CHARS).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
