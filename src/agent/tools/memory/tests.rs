//! Memory tools: ranking on a small corpus, refresh after a change, path refusals.

use std::path::Path;

use serde_json::{Value, json};

use super::get::MemoryGetTool;
use super::index::Index;
use super::*;
use crate::agent::tools::test_support::ctx;

/// A workspace with a long-term file and three daily notes.
fn corpus() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("memory/projects")).unwrap();
    std::fs::write(
        ws.path().join("MEMORY.md"),
        "# About the user\n\
         Name is Dana. Prefers short answers in German.\n\
         Allergic to peanuts.\n\
         \n\
         # Servers\n\
         The backup server is called fjord and runs nightly at 02:00.\n\
         Deploys go through the staging host first.\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("memory/2026-11-20.md"),
        "# 2026-11-20\n\
         Dana asked to book a table for the team dinner on Friday.\n\
         \n\
         Decided: the dinner is at Luigi's, 19:30, eight people.\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("memory/2026-11-24.md"),
        "# 2026-11-24\n\
         Fixed the flaky invoice export; the cause was a timezone bug in the report job.\n\
         \n\
         Todo: tell accounting the invoices for October must be exported again.\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("memory/projects/garden.md"),
        "# Garden project\n\
         Tomatoes go in the raised bed by the wall. Water them every second day.\n\
         The zucchini failed last year: too much shade.\n",
    )
    .unwrap();
    ws
}

fn index_of(ws: &Path) -> Index {
    let mut index = Index::default();
    index.refresh(&std::fs::canonicalize(ws).unwrap());
    index
}

fn top(index: &Index, query: &str) -> (String, usize, usize) {
    let hits = index.search(query, 5, 0.0);
    let hit = hits
        .first()
        .unwrap_or_else(|| panic!("no hit for {query:?}"));
    (hit.path.clone(), hit.start_line, hit.end_line)
}

#[test]
fn the_right_file_and_lines_rank_first() {
    let ws = corpus();
    let index = index_of(ws.path());
    // A word found in one note only.
    assert_eq!(
        top(&index, "zucchini"),
        ("memory/projects/garden.md".into(), 1, 3)
    );
    assert_eq!(top(&index, "Luigi"), ("memory/2026-11-20.md".into(), 1, 4));
    // Several words, with words found in other files too ("server", "Dana").
    assert_eq!(
        top(&index, "which backup server"),
        ("MEMORY.md".into(), 5, 7)
    );
    assert_eq!(
        top(&index, "Dana peanut allergy"),
        ("MEMORY.md".into(), 1, 3)
    );
    // Plurals meet singulars; case does not matter.
    assert_eq!(
        top(&index, "INVOICE exports"),
        ("memory/2026-11-24.md".into(), 1, 4)
    );
    // A date finds its daily note by its name and heading.
    assert_eq!(top(&index, "2026-11-20").0, "memory/2026-11-20.md");
    // Nothing matches: no results.
    assert!(index.search("kubernetes", 5, 0.0).is_empty());
    // Results are ordered, limited, and filtered by score.
    let hits = index.search("dinner Dana", 5, 0.0);
    assert!(hits.len() >= 2);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert_eq!(index.search("dinner Dana", 1, 0.0).len(), 1);
    assert!(index.search("dinner Dana", 5, 1_000.0).is_empty());
}

#[test]
fn the_index_refreshes_when_files_change() {
    let ws = corpus();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let mut index = Index::default();
    index.refresh(&root);
    assert_eq!(index.rebuilds, 1);
    index.refresh(&root);
    assert_eq!(index.rebuilds, 1, "unchanged files are not indexed again");
    assert!(index.search("marzipan", 5, 0.0).is_empty());
    // A changed file (its size differs) is chunked again.
    let note = ws.path().join("memory/2026-11-24.md");
    let mut text = std::fs::read_to_string(&note).unwrap();
    text.push_str("\nBought marzipan for the office.\n");
    std::fs::write(&note, text).unwrap();
    index.refresh(&root);
    assert_eq!(index.rebuilds, 2);
    assert_eq!(
        top(&index, "marzipan"),
        ("memory/2026-11-24.md".into(), 1, 6)
    );
    // A new file is found, a removed one is gone.
    std::fs::write(
        ws.path().join("memory/2026-11-25.md"),
        "Ordered a new espresso machine.\n",
    )
    .unwrap();
    std::fs::remove_file(ws.path().join("memory/projects/garden.md")).unwrap();
    index.refresh(&root);
    assert_eq!(top(&index, "espresso").0, "memory/2026-11-25.md");
    assert!(index.search("zucchini", 5, 0.0).is_empty());
}

#[test]
fn other_files_and_symlinks_out_of_the_workspace_are_not_indexed() {
    let ws = corpus();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.md"),
        "the launch code is swordfish\n",
    )
    .unwrap();
    std::fs::write(ws.path().join("NOTES.md"), "swordfish in a plain file\n").unwrap();
    std::fs::write(
        ws.path().join("memory/plain.txt"),
        "swordfish in a text file\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        ws.path().join("memory/s.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("memory/out")).unwrap();
    // A symlink to a note inside the workspace is followed.
    std::os::unix::fs::symlink(
        ws.path().join("MEMORY.md"),
        ws.path().join("memory/link.md"),
    )
    .unwrap();
    let index = index_of(ws.path());
    assert!(index.search("swordfish", 5, 0.0).is_empty());
    assert!(
        index
            .refused
            .iter()
            .any(|r| r.starts_with("memory/s.md: refused")),
        "{:?}",
        index.refused
    );
    assert_eq!(top(&index, "fjord").0, "MEMORY.md");
    assert!(
        index
            .search("fjord", 5, 0.0)
            .iter()
            .any(|h| h.path == "memory/link.md")
    );
}

async fn call(tool: &dyn Tool, ws: &Path, args: Value) -> ToolOutput {
    tool.call(args, &ctx(ws)).await
}

#[tokio::test]
async fn memory_search_answers_json_with_citations() {
    let ws = corpus();
    let tool = MemorySearchTool::default();
    let out = call(
        &tool,
        ws.path(),
        json!({"query": "zucchini shade", "maxResults": 2}),
    )
    .await;
    assert!(!out.is_error, "{}", out.text);
    let v: Value = serde_json::from_str(&out.text).unwrap();
    let first = &v["results"][0];
    assert_eq!(first["path"], "memory/projects/garden.md");
    assert_eq!(
        (first["startLine"].as_u64(), first["endLine"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(first["citation"], "memory/projects/garden.md#L1-L3");
    assert!(
        first["snippet"]
            .as_str()
            .unwrap()
            .contains("zucchini failed")
    );
    assert!(v["results"].as_array().unwrap().len() <= 2);
    let out = call(&tool, ws.path(), json!({"query": "  "})).await;
    assert!(out.is_error);
    let empty = tempfile::tempdir().unwrap();
    let out = call(&tool, empty.path(), json!({"query": "anything"})).await;
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(v["results"], json!([]));
    assert!(v["note"].as_str().unwrap().contains("No memory files"));
}

#[tokio::test]
async fn memory_get_reads_lines_and_refuses_other_paths() {
    let ws = corpus();
    let out = call(
        &MemoryGetTool,
        ws.path(),
        json!({"path": "MEMORY.md", "from": 5, "lines": 2}),
    )
    .await;
    assert!(!out.is_error, "{}", out.text);
    let v: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(
        v["text"],
        "# Servers\nThe backup server is called fjord and runs nightly at 02:00."
    );
    assert_eq!((v["from"].as_u64(), v["to"].as_u64()), (Some(5), Some(6)));
    assert_eq!(v["more"], "continue with from=7");
    let out = call(
        &MemoryGetTool,
        ws.path(),
        json!({"path": "memory/projects/garden.md"}),
    )
    .await;
    assert!(out.text.contains("raised bed"), "{}", out.text);

    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "swordfish\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        ws.path().join("memory/s.md"),
    )
    .unwrap();
    std::fs::write(ws.path().join("SOUL.md"), "soul\n").unwrap();
    std::os::unix::fs::symlink(ws.path().join("SOUL.md"), ws.path().join("memory/soul.md"))
        .unwrap();
    for path in [
        "SOUL.md",
        "memory/../SOUL.md",
        "../x.md",
        "memory/s.md",
        "memory/soul.md",
        "memory",
        "/etc/passwd",
    ] {
        let out = call(&MemoryGetTool, ws.path(), json!({"path": path})).await;
        assert!(
            out.is_error && out.text.starts_with("refused"),
            "{path}: {}",
            out.text
        );
        assert!(!out.text.contains("swordfish") && !out.text.contains("soul\n"));
    }
    let out = call(&MemoryGetTool, ws.path(), json!({"path": "memory/none.md"})).await;
    assert_eq!(
        out,
        ToolOutput::error("no such memory file: memory/none.md")
    );
}

/// Search time over about 1 MB of notes (printed, not asserted): run with `--nocapture`.
#[test]
fn search_time_on_a_megabyte_of_notes() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("memory")).unwrap();
    let words = [
        "meeting", "invoice", "server", "garden", "dinner", "deploy", "report", "travel",
    ];
    let mut total = 0;
    for day in 0..160 {
        let mut text = format!("# day {day}\n");
        for p in 0..12 {
            for w in 0..40 {
                text.push_str(words[(day * 7 + p * 3 + w) % words.len()]);
                text.push_str(&format!(" n{} ", (day * 131 + p * 17 + w) % 5000));
            }
            text.push_str("\n\n");
        }
        total += text.len();
        std::fs::write(ws.path().join(format!("memory/d{day:03}.md")), text).unwrap();
    }
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let mut index = Index::default();
    let started = std::time::Instant::now();
    index.refresh(&root);
    let built = started.elapsed();
    let started = std::time::Instant::now();
    index.refresh(&root);
    let hits = index.search("invoice n4321 server", 6, 0.0);
    let searched = started.elapsed();
    assert!(!hits.is_empty());
    println!(
        "memory search: {total} bytes in {} chunks; first index {built:?}; refresh check + search {searched:?}",
        index.chunk_count()
    );
}
