//! `read`: a text file's contents, optionally a range of lines.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::capture::Capture;
use super::confined::{OpenError, open_resolved};
use super::paths::resolve_in_workspace;
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// Reads a text file in the workspace: `{path, offset?, limit?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

struct ReadArgs {
    path: String,
    /// First line to show, 1-based.
    offset: u64,
    /// Most lines to show.
    limit: Option<u64>,
}

impl Tool for ReadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".to_string(),
            description: "Read a text file in the workspace. Long output keeps the head and \
                          tail; use offset and limit to page through large files."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to read"}
                },
                "required": ["path"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let parsed = parse_args(&args, |m| {
                let limit = args::optional_u64(m, "limit")?;
                if limit == Some(0) {
                    return Err(super::args::ArgError::invalid(
                        "argument `limit` must be at least 1",
                    ));
                }
                Ok(ReadArgs {
                    path: args::required_str(m, "path")?.to_string(),
                    offset: args::optional_u64(m, "offset")?.unwrap_or(1).max(1),
                    limit,
                })
            });
            let a = match parsed {
                Ok(a) => a,
                Err(out) => return out,
            };
            match resolve_in_workspace(&ctx.workspace, &a.path) {
                Ok(path) => read_lines(&ctx.workspace, path, &a, ctx.max_output_chars).await,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// Lines of `path`, resolved for `a.path` a moment ago, opened as [`open_resolved`] opens
/// it (no symlink followed at the end, a regular file inside the workspace).
async fn read_lines(workspace: &Path, path: PathBuf, a: &ReadArgs, max_chars: usize) -> ToolOutput {
    let shown = &a.path;
    let opened = {
        let workspace = workspace.to_path_buf();
        let name = shown.clone();
        tokio::task::spawn_blocking(move || {
            open_resolved(&workspace, &path, &name).map_err(|e| {
                let dir = matches!(e, OpenError::NotAFile(_))
                    && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                (e, dir)
            })
        })
        .await
    };
    let mut file = match opened {
        Ok(Ok((file, _))) => tokio::fs::File::from_std(file),
        Ok(Err((_, true))) => {
            return ToolOutput::error(format!("{shown} is a directory; use ls to list it"));
        }
        Ok(Err((OpenError::Missing(_), _))) => {
            return ToolOutput::error(format!("no such file: {shown}"));
        }
        Ok(Err((e, _))) => return ToolOutput::error(e.to_string()),
        Err(e) => return ToolOutput::error(format!("cannot read {shown}: {e}")),
    };
    let end = a.limit.map(|l| a.offset.saturating_add(l));
    let mut capture = Capture::for_chars(max_chars);
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: u64 = 1; // line of the next byte
    let mut last_shown = 0;
    let mut more = false;
    'read: loop {
        let n = match file.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return ToolOutput::error(format!("cannot read {shown}: {e}")),
        };
        let mut chunk = &buf[..n];
        if chunk.contains(&0) {
            return ToolOutput::error(format!(
                "{shown} looks like a binary file (it has NUL bytes)"
            ));
        }
        while !chunk.is_empty() {
            if end.is_some_and(|end| line >= end) {
                more = true;
                break 'read;
            }
            let (segment, rest, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (&chunk[..=i], &chunk[i + 1..], true),
                None => (chunk, &[][..], false),
            };
            if line >= a.offset {
                capture.push(segment);
                last_shown = line;
            }
            if newline {
                line += 1;
            }
            chunk = rest;
        }
    }
    if capture.is_empty() {
        if a.offset > 1 {
            let lines = line.saturating_sub(1);
            return ToolOutput::error(format!(
                "offset {} is past the end of {shown} (about {lines} lines)",
                a.offset
            ));
        }
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    let mut text = capture.into_text(max_chars);
    if more {
        text.push_str(&format!(
            "\n[lines {}-{last_shown} shown; more follow: continue with offset={}]",
            a.offset,
            last_shown + 1
        ));
    }
    ToolOutput::ok(text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use crate::agent::tools::test_support::ctx;

    async fn read(dir: &Path, args: Value) -> ToolOutput {
        ReadTool.call(args, &ctx(dir)).await
    }

    #[tokio::test]
    async fn reads_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "one\ntwo\nthree\n").unwrap();
        let out = read(dir.path(), json!({"path": "f.txt"})).await;
        assert_eq!(out, ToolOutput::ok("one\ntwo\nthree\n"));
    }

    #[tokio::test]
    async fn offset_and_limit_select_lines() {
        let dir = tempfile::tempdir().unwrap();
        let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("f.txt"), body).unwrap();
        let out = read(
            dir.path(),
            json!({"path": "f.txt", "offset": 3, "limit": 2}),
        )
        .await;
        assert!(!out.is_error);
        assert_eq!(
            out.text,
            "line 3\nline 4\n\n[lines 3-4 shown; more follow: continue with offset=5]"
        );
        let out = read(dir.path(), json!({"path": "f.txt", "offset": 9})).await;
        assert_eq!(out.text, "line 9\nline 10\n");
        let out = read(
            dir.path(),
            json!({"path": "f.txt", "offset": 9, "limit": 5}),
        )
        .await;
        assert_eq!(out.text, "line 9\nline 10\n");
        let out = read(dir.path(), json!({"path": "f.txt", "offset": 50})).await;
        assert!(
            out.is_error && out.text.contains("past the end"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn long_files_are_truncated_with_marker() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "y".repeat(50_000)).unwrap();
        let out = read(dir.path(), json!({"path": "big.txt"})).await;
        assert!(out.text.chars().count() <= 10_000);
        assert!(out.text.contains("of 50000 total"), "{}", &out.text[..100]);
    }

    #[tokio::test]
    async fn missing_files_and_directories_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = read(dir.path(), json!({"path": "nope.txt"})).await;
        assert_eq!(out, ToolOutput::error("no such file: nope.txt"));
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let out = read(dir.path(), json!({"path": "d"})).await;
        assert!(out.is_error && out.text.contains("is a directory"));
        let out = read(dir.path(), json!({})).await;
        assert!(out.is_error && out.text.contains("`path`"));
        let out = read(dir.path(), json!({"path": "../x"})).await;
        assert!(out.is_error && out.text.contains("outside the workspace"));
    }

    #[tokio::test]
    async fn a_link_that_stays_inside_is_read_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.txt"), "inside\n").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("alias")).unwrap();
        let out = read(dir.path(), json!({"path": "alias"})).await;
        assert_eq!(out, ToolOutput::ok("inside\n"));
    }

    /// The race made deterministic: resolved, swapped for a link out, then read. The old
    /// `read_lines` opened the path with `tokio::fs::File::open` (following the link) and
    /// showed the secret.
    #[tokio::test]
    async fn a_file_swapped_for_a_link_out_after_the_check_is_not_read() {
        let (dir, _outside, _secret, path) = super::super::test_support::swapped_for_link_out();
        let a = ReadArgs {
            path: "x".into(),
            offset: 1,
            limit: None,
        };
        let out = read_lines(dir.path(), path, &a, 10_000).await;
        assert_eq!(out, ToolOutput::error("refused: x is a symlink"));
    }
}
