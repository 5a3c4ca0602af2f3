//! The memory index of one workspace: `MEMORY.md` and `memory/**/*.md`, chunked and ranked
//! with BM25 (the `bm25` crate). It lives in memory and is refreshed before each search: a
//! file whose size or mtime changed is chunked again, and the ranking is rebuilt when any
//! file came, went or changed. Files reached through a symlink that leaves the workspace are
//! refused (left out and reported), as the file tools refuse them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bm25::{Document, SearchEngine, SearchEngineBuilder, Tokenizer};

use super::chunk::{Chunk, chunks};
use crate::agent::tools::confined::read_in_workspace;

/// The long-term memory file at the workspace's top.
pub const MEMORY_FILE: &str = "MEMORY.md";
/// The folder of daily and topic notes.
pub const MEMORY_DIR: &str = "memory";
/// Folder depth under `memory/` that is indexed.
const MAX_DEPTH: usize = 8;
/// Files larger than this (bytes, 8 MiB) are left out of the index.
const MAX_FILE_BYTES: u64 = 8 << 20;
/// Most files indexed in one workspace.
const MAX_FILES: usize = 10_000;

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The file, relative to the workspace (`/`-separated).
    pub path: String,
    /// The chunk's first line, 1-based.
    pub start_line: usize,
    /// The chunk's last line, 1-based.
    pub end_line: usize,
    /// The BM25 score (higher is better).
    pub score: f32,
    /// The chunk's text.
    pub text: String,
}

/// What makes a file look unchanged: its size and mtime.
type Signature = (u64, Option<SystemTime>);

struct FileChunks {
    signature: Signature,
    chunks: Vec<Chunk>,
}

/// The index of one workspace.
#[derive(Default)]
pub struct Index {
    files: BTreeMap<String, FileChunks>,
    /// `(file, chunk index)` of each document id.
    ids: Vec<(String, usize)>,
    engine: Option<SearchEngine<usize, u32, Words>>,
    /// Paths left out at the last refresh, with why.
    pub refused: Vec<String>,
    /// How many times the ranking was rebuilt (for tests and logs).
    pub rebuilds: u64,
}

impl Index {
    /// Brings the index up to date with the files of `root` (a canonical workspace).
    pub fn refresh(&mut self, root: &Path) {
        let mut refused = Vec::new();
        let found = memory_files(root, &mut refused);
        let mut changed = found.len() != self.files.len();
        let mut files = BTreeMap::new();
        for (rel, _path, signature) in found {
            let kept = self.files.remove(&rel).filter(|f| f.signature == signature);
            let entry = match kept {
                Some(entry) => entry,
                None => {
                    changed = true;
                    // Opened again as chela opens workspace files (no symlink out of the
                    // workspace followed, even one swapped in since the walk).
                    match read_in_workspace(root, &rel, MAX_FILE_BYTES) {
                        Ok(bytes) => FileChunks {
                            signature,
                            chunks: chunks(&String::from_utf8_lossy(&bytes)),
                        },
                        Err(e) => {
                            refused.push(format!("{rel}: cannot read it ({e})"));
                            continue;
                        }
                    }
                }
            };
            files.insert(rel, entry);
        }
        changed |= !self.files.is_empty();
        self.files = files;
        self.refused = refused;
        if changed || self.engine.is_none() {
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let mut ids = Vec::new();
        let mut documents = Vec::new();
        for (rel, file) in &self.files {
            for (i, chunk) in file.chunks.iter().enumerate() {
                // The heading and file name count as words of every chunk under them.
                let mut contents = format!("{rel}\n");
                if let Some(h) = chunk.heading.as_ref().filter(|_| !starts_heading(chunk)) {
                    contents.push_str(h);
                    contents.push('\n');
                }
                contents.push_str(&chunk.text);
                documents.push(Document::new(ids.len(), contents));
                ids.push((rel.clone(), i));
            }
        }
        self.engine = Some(
            SearchEngineBuilder::<usize, u32, Words>::with_tokenizer_and_documents(
                Words, documents,
            )
            .build(),
        );
        self.ids = ids;
        self.rebuilds += 1;
    }

    /// The best `limit` chunks for `query` scoring at least `min_score`, best first (ties:
    /// by path, then line).
    pub fn search(&self, query: &str, limit: usize, min_score: f32) -> Vec<Hit> {
        let Some(engine) = &self.engine else {
            return Vec::new();
        };
        let mut hits: Vec<Hit> = engine
            .search(query, None)
            .into_iter()
            .filter(|r| r.score >= min_score)
            .filter_map(|r| {
                let (rel, i) = self.ids.get(r.document.id)?;
                let chunk = self.files.get(rel)?.chunks.get(*i)?;
                Some(Hit {
                    path: rel.clone(),
                    start_line: chunk.start_line,
                    end_line: chunk.end_line,
                    score: r.score,
                    text: chunk.text.clone(),
                })
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
                .then_with(|| a.start_line.cmp(&b.start_line))
        });
        hits.truncate(limit);
        hits
    }

    /// How many chunks are indexed.
    pub fn chunk_count(&self) -> usize {
        self.ids.len()
    }
}

fn starts_heading(chunk: &Chunk) -> bool {
    chunk.text.trim_start().starts_with('#')
}

/// `MEMORY.md` and the `.md` files under `memory/` of `root`, as (relative path, path,
/// signature), in path order. Symlinks are followed only to files inside `root`.
fn memory_files(root: &Path, refused: &mut Vec<String>) -> Vec<(String, PathBuf, Signature)> {
    let mut out = Vec::new();
    if let Some(file) = inside(root, &root.join(MEMORY_FILE), MEMORY_FILE, refused) {
        out.push(file);
    }
    walk(
        root,
        &root.join(MEMORY_DIR),
        MEMORY_DIR,
        0,
        &mut out,
        refused,
    );
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<(String, PathBuf, Signature)>,
    refused: &mut Vec<String>,
) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        // A symlinked folder is not walked: it could lead out of the workspace or in a loop.
        if meta.file_type().is_symlink() {
            refused.push(format!("{rel}: a symlinked folder is not indexed"));
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= MAX_FILES {
            refused.push(format!(
                "{rel}: more than {MAX_FILES} files; the rest is left out"
            ));
            return;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = format!("{rel}/{name}");
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(root, &path, &child_rel, depth + 1, out, refused);
            }
        } else if name.ends_with(".md")
            && let Some(file) = inside(root, &path, &child_rel, refused)
        {
            out.push(file);
        }
    }
}

/// `path` with its signature when it is a regular file inside `root` (after symlinks).
fn inside(
    root: &Path,
    path: &Path,
    rel: &str,
    refused: &mut Vec<String>,
) -> Option<(String, PathBuf, Signature)> {
    let link = std::fs::symlink_metadata(path).ok()?;
    let real = if link.file_type().is_symlink() {
        match std::fs::canonicalize(path) {
            Ok(real) if real.starts_with(root) => real,
            Ok(_) | Err(_) => {
                refused.push(format!(
                    "{rel}: refused, a symlink that leads outside the workspace"
                ));
                return None;
            }
        }
    } else {
        path.to_path_buf()
    };
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() {
        return None;
    }
    if meta.len() > MAX_FILE_BYTES {
        refused.push(format!(
            "{rel}: larger than {} MiB, not indexed",
            MAX_FILE_BYTES >> 20
        ));
        return None;
    }
    Some((rel.to_owned(), real, (meta.len(), meta.modified().ok())))
}

/// The tokenizer: lowercase words of letters and digits, a few English stop words left out,
/// a plural `s` taken off (so `meetings` finds `meeting`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Words;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "was", "were", "with",
];

impl Tokenizer for Words {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        input_text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .filter(|w| !STOP_WORDS.contains(&w.as_str()))
            .map(stem)
            .collect()
    }
}

fn stem(word: String) -> String {
    let plural = word.chars().count() > 3
        && word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is");
    if plural {
        let mut w = word;
        w.pop();
        w
    } else {
        word
    }
}
