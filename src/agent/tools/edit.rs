//! `edit`: replace one exact, unique piece of a file's text.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::confined::{OpenError, read_resolved, write_resolved};
use super::paths::resolve_in_workspace;
use super::{Tool, ToolContext, ToolOutput, args, parse_args};
use crate::agent::provider::{BoxFuture, ToolSpec};

/// Replaces the single occurrence of `old_text` with `new_text`: `{path, old_text, new_text}`.
/// Refuses, saying how many matches there were, unless there is exactly one.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

impl Tool for EditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit".to_string(),
            description: "Replace text in a workspace file. old_text must match exactly one \
                          place in the file (including whitespace); otherwise nothing changes \
                          and the number of matches is reported."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace"},
                    "old_text": {"type": "string", "description": "Exact text to replace; must occur exactly once"},
                    "new_text": {"type": "string", "description": "Replacement text"}
                },
                "required": ["path", "old_text", "new_text"]
            }),
        }
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let a = match parse_args(&args, |m| {
                Ok(EditArgs {
                    path: args::required_str(m, "path")?.to_string(),
                    old_text: args::required_str(m, "old_text")?.to_string(),
                    new_text: args::required_str(m, "new_text")?.to_string(),
                })
            }) {
                Ok(a) => a,
                Err(out) => return out,
            };
            if a.old_text.is_empty() {
                return ToolOutput::error("edit refused: old_text is empty");
            }
            match resolve_in_workspace(&ctx.workspace, &a.path) {
                Ok(path) => edit(&ctx.workspace, path, &a).await,
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

/// Edits `path`, resolved for `a.path` a moment ago: read as [`read_resolved`] reads and
/// written back as [`write_resolved`] writes (no symlink followed at the end, the open file
/// checked to be inside the workspace each time).
async fn edit(workspace: &Path, path: PathBuf, a: &EditArgs) -> ToolOutput {
    let shown = &a.path;
    let read = {
        let (workspace, path, name) = (workspace.to_path_buf(), path.clone(), shown.clone());
        tokio::task::spawn_blocking(move || read_resolved(&workspace, &path, &name, u64::MAX)).await
    };
    let text = match read {
        Ok(Ok(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => return ToolOutput::error(format!("edit refused: {shown} is not UTF-8 text")),
        },
        Ok(Err(OpenError::Missing(_))) => {
            return ToolOutput::error(format!("no such file: {shown}; use write to create it"));
        }
        Ok(Err(e)) => return ToolOutput::error(e.to_string()),
        Err(e) => return ToolOutput::error(format!("cannot read {shown}: {e}")),
    };
    let at = match find_unique(&text, &a.old_text) {
        Ok(at) => at,
        Err(0) => {
            return ToolOutput::error(format!(
                "edit refused: old_text was not found in {shown} (0 matches); read the file \
                 and copy the exact text, including whitespace"
            ));
        }
        Err(n) => {
            return ToolOutput::error(format!(
                "edit refused: old_text matches {n} places in {shown}; include more \
                 surrounding text so it matches exactly one"
            ));
        }
    };
    let mut updated = String::with_capacity(text.len() - a.old_text.len() + a.new_text.len());
    updated.push_str(&text[..at]);
    updated.push_str(&a.new_text);
    updated.push_str(&text[at + a.old_text.len()..]);
    let written = {
        let (workspace, name) = (workspace.to_path_buf(), shown.clone());
        tokio::task::spawn_blocking(move || {
            write_resolved(&workspace, &path, &name, updated.as_bytes())
        })
        .await
    };
    match written {
        Ok(Ok(())) => {
            let line = text[..at].matches('\n').count() + 1;
            ToolOutput::ok(format!("edited {shown}: replaced 1 match at line {line}"))
        }
        Ok(Err(e)) => ToolOutput::error(e.to_string()),
        Err(e) => ToolOutput::error(format!("cannot write {shown}: {e}")),
    }
}

/// The byte offset of the only occurrence of `needle` (overlaps count), or the match count.
fn find_unique(hay: &str, needle: &str) -> Result<usize, usize> {
    let mut found = None;
    let mut count = 0;
    let mut start = 0;
    while let Some(i) = hay[start..].find(needle) {
        let at = start + i;
        count += 1;
        found.get_or_insert(at);
        // Step one char so overlapping matches ("aa" in "aaa") count too.
        start = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    match (count, found) {
        (1, Some(at)) => Ok(at),
        _ => Err(count),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use crate::agent::tools::test_support::ctx;

    async fn run(dir: &Path, old: &str, new: &str) -> ToolOutput {
        let args = json!({"path": "f.txt", "old_text": old, "new_text": new});
        EditTool.call(args, &ctx(dir)).await
    }

    #[tokio::test]
    async fn one_match_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "alpha\nbeta\ngamma\n").unwrap();
        let out = run(dir.path(), "beta", "BETA").await;
        assert_eq!(
            out,
            ToolOutput::ok("edited f.txt: replaced 1 match at line 2")
        );
        let text = std::fs::read_to_string(dir.path().join("f.txt")).unwrap();
        assert_eq!(text, "alpha\nBETA\ngamma\n");
    }

    #[tokio::test]
    async fn zero_matches_are_refused_and_file_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "alpha\n").unwrap();
        let out = run(dir.path(), "delta", "x").await;
        assert!(
            out.is_error && out.text.contains("0 matches"),
            "{}",
            out.text
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            "alpha\n"
        );
    }

    #[tokio::test]
    async fn two_matches_are_refused_and_file_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "x = 1;\nx = 1;\n").unwrap();
        let out = run(dir.path(), "x = 1;", "x = 2;").await;
        assert!(
            out.is_error && out.text.contains("matches 2 places"),
            "{}",
            out.text
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
            "x = 1;\nx = 1;\n"
        );
    }

    #[test]
    fn overlapping_matches_count() {
        assert_eq!(find_unique("aaa", "aa"), Err(2));
        assert_eq!(find_unique("ébé", "é"), Err(2));
        assert_eq!(find_unique("abc", "bc"), Ok(1));
    }

    #[tokio::test]
    async fn missing_file_and_empty_old_text_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), "a", "b").await;
        assert!(out.is_error && out.text.contains("no such file"));
        std::fs::write(dir.path().join("f.txt"), "a").unwrap();
        let out = run(dir.path(), "", "b").await;
        assert!(out.is_error && out.text.contains("empty"));
    }

    #[tokio::test]
    async fn a_link_that_stays_inside_is_edited_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.txt"), "alpha beta").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("f.txt")).unwrap();
        let out = run(dir.path(), "beta", "gamma").await;
        assert_eq!(
            out,
            ToolOutput::ok("edited f.txt: replaced 1 match at line 1")
        );
        let text = std::fs::read_to_string(dir.path().join("real.txt")).unwrap();
        assert_eq!(text, "alpha gamma");
    }

    /// The race made deterministic: resolved, swapped for a link out, then edited. The old
    /// `edit` read and wrote with `tokio::fs` (following the link): the file outside was
    /// rewritten (and a wrong old_text told whether a secret was in it).
    #[tokio::test]
    async fn a_file_swapped_for_a_link_out_after_the_check_is_not_edited() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("config.toml");
        std::fs::write(&secret, "token = 'SECRET'").unwrap();
        std::fs::write(dir.path().join("f.txt"), "plain").unwrap();
        let path = resolve_in_workspace(dir.path(), "f.txt").unwrap();
        std::fs::remove_file(dir.path().join("f.txt")).unwrap();
        std::os::unix::fs::symlink(&secret, dir.path().join("f.txt")).unwrap();
        let a = EditArgs {
            path: "f.txt".into(),
            old_text: "SECRET".into(),
            new_text: "PWNED".into(),
        };
        let out = edit(dir.path(), path, &a).await;
        assert_eq!(out, ToolOutput::error("refused: f.txt is a symlink"));
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "token = 'SECRET'"
        );
    }
}
