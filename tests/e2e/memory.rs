//! End-to-end: in `chela chat` (the terminal channel) the fake model calls `memory_search`
//! and gets a result citing the note's file and lines, then `memory_get` reads those lines;
//! the model is told about MEMORY.md and today's daily note. A long `chela agent` session
//! gets one silent flush turn right before its first summary, never delivered nor kept.
//! `/compact` in the chat flushes first too.

use crate::common;

use common::{KEY, Setup, last_user_text, messages, text_of};
use serde_json::Value;

fn notes(setup: &Setup) {
    std::fs::create_dir_all(setup.path("ws/memory/projects")).unwrap();
    std::fs::write(
        setup.path("ws/MEMORY.md"),
        "# About the user\nName is Dana. Prefers short answers.\n",
    )
    .unwrap();
    std::fs::write(
        setup.path("ws/memory/2026-11-20.md"),
        "# 2026-11-20\nBooked the team dinner at Luigi's for Friday.\n",
    )
    .unwrap();
    std::fs::write(
        setup.path("ws/memory/projects/garden.md"),
        "# Garden\nTomatoes go in the raised bed.\n\nThe zucchini failed last year: too much shade.\n",
    )
    .unwrap();
}

/// Every tool result in `KEY`'s transcript, in order: whether it failed, and its text.
async fn tool_results(setup: &Setup) -> Vec<(bool, String)> {
    let entries = setup.export(KEY).await;
    messages(&entries)
        .into_iter()
        .filter(|m| m["role"] == "toolResult")
        .map(|m| (m["isError"] == true, text_of(m)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_searches_memory_and_gets_cited_lines() {
    let setup = Setup::openai("steer").await;
    notes(&setup);
    let mut chat = setup.chat();
    chat.send(r#"tool memory_search {"query": "why did the zucchini fail"}"#)
        .await;
    chat.wait_for("done:").await;
    // The quoted result starts with the garden note and its lines.
    chat.wait_for(r#"{"results":[{"path":"memory/projects/garden.md","startLine":1,"endLine":4,"#)
        .await;
    chat.send(r#"tool memory_get {"path": "memory/projects/garden.md", "from": 4, "lines": 1}"#)
        .await;
    chat.wait_for(r#""from":4,"#).await;
    chat.send(r#"tool memory_get {"path": "config.toml"}"#)
        .await;
    chat.wait_for("not a memory file").await;
    chat.finish().await;

    let results = tool_results(&setup).await;
    assert_eq!(results.len(), 3);
    assert!(
        !results[0].0 && !results[1].0 && results[2].0,
        "{results:?}"
    );
    let search: Value = serde_json::from_str(&results[0].1).unwrap();
    let first = &search["results"][0];
    assert_eq!(first["path"], "memory/projects/garden.md");
    assert_eq!(first["startLine"], 1);
    assert_eq!(first["endLine"], 4);
    assert_eq!(first["citation"], "memory/projects/garden.md#L1-L4");
    assert!(
        first["snippet"]
            .as_str()
            .unwrap()
            .contains("too much shade")
    );
    let get: Value = serde_json::from_str(&results[1].1).unwrap();
    assert_eq!(
        get["text"],
        "The zucchini failed last year: too much shade."
    );
    assert!(
        results[2]
            .1
            .starts_with("refused: config.toml is not a memory file")
    );

    // The model was offered both tools and told where memory lives.
    let calls = setup.model_calls();
    let offered: Vec<&str> = calls[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"memory_search") && offered.contains(&"memory_get"));
    let system = calls[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("## Memory"), "{system}");
    assert!(system.contains("MEMORY.md") && system.contains("memory/YYYY-MM-DD.md"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_flush_turn_comes_before_the_first_summary() {
    let s = Setup::start(
        common::Provider::OpenAi,
        "steer",
        200,
        "context_window = 4800",
    )
    .await;
    let config = std::fs::read_to_string(s.config()).unwrap();
    let config = config.replace("[agent]\n", "[agent]\ncompaction_reserve_tokens = 500\n");
    std::fs::write(s.config(), config).unwrap();
    let filler = "the quick brown fox jumps over the lazy dog ".repeat(8);
    let summary = |b: &Value| last_user_text(b).contains("<conversation>");
    let mut turn = 0;
    while !s.model_calls().iter().any(summary) {
        assert!(turn < 20, "no compaction after 20 turns");
        let (status, json) = s.agent_json(&format!("turn {turn}: {filler}")).await;
        assert!(status.success(), "{json}");
        // Every answer is the turn's own, never the flush turn's.
        assert_eq!(
            json["text"].as_str().unwrap(),
            format!("ok: turn {turn}: {}", filler.trim_end())
        );
        turn += 1;
    }
    let calls = s.model_calls();
    let flush = calls
        .iter()
        .position(|b| last_user_text(b).starts_with("Pre-compaction memory flush"))
        .expect("a flush request");
    let first_summary = calls.iter().position(summary).unwrap();
    assert_eq!(
        flush + 1,
        first_summary,
        "the flush comes right before the summary"
    );
    assert_eq!(
        calls
            .iter()
            .filter(|b| last_user_text(b).starts_with("Pre-compaction"))
            .count(),
        1
    );
    // It offered only the file and memory tools, and nothing of it is in the transcript.
    let offered: Vec<&str> = calls[flush]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(
        offered,
        ["read", "ls", "write", "edit", "memory_search", "memory_get"]
    );
    let exported = s.export(KEY).await;
    assert!(
        !exported
            .iter()
            .any(|e| e.to_string().contains("Pre-compaction"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_asked_for_in_the_chat_flushes_first() {
    let s = Setup::start(common::Provider::OpenAi, "steer", 200, "").await;
    for turn in 0..3 {
        let (status, json) = s.agent_json(&format!("turn {turn}")).await;
        assert!(status.success(), "{json}");
    }
    let out = s.run(&["agent", "--message", "/compact"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("Compacted:"),
        "{stdout}"
    );
    let calls = s.model_calls();
    let flush = calls
        .iter()
        .position(|b| last_user_text(b).starts_with("Pre-compaction memory flush"))
        .expect("a flush request before /compact's summary");
    let summary = calls
        .iter()
        .position(|b| last_user_text(b).contains("<conversation>"))
        .unwrap();
    assert_eq!(
        flush + 1,
        summary,
        "the flush comes right before the summary"
    );
}

/// The secret every link below points at: in no model request, ever.
const SECRET: &str = "SECRET-e2e-7f3a PRIVATE KEY";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_files_linked_out_of_the_workspace_never_reach_the_model() {
    use std::os::unix::fs::symlink;
    let setup = Setup::openai("steer").await;
    // Outside the workspace (as ~/.ssh/id_rsa and the config file would be).
    let outside = setup.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("id_rsa");
    std::fs::write(&secret, format!("# {SECRET}\n{SECRET}\n")).unwrap();
    let skill = outside.join("SKILL.md");
    std::fs::write(
        &skill,
        format!("---\nname: leak\ndescription: {SECRET}\n---\n"),
    )
    .unwrap();
    let ws = setup.path("ws");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::create_dir_all(ws.join("skills/leak")).unwrap();
    // What `ln -sf ~/.ssh/id_rsa USER.md` and the like leave for the next start.
    for name in ["AGENTS.md", "USER.md", "MEMORY.md", "memory/leak.md"] {
        symlink(&secret, ws.join(name)).unwrap();
    }
    symlink(&skill, ws.join("skills/leak/SKILL.md")).unwrap();
    // A plain file is read, so the prompt files were looked at.
    std::fs::write(ws.join("SOUL.md"), "Be kind, e2e soul.\n").unwrap();

    let (status, json) = setup.agent_json("hello").await;
    assert!(status.success(), "{json}");
    let search = r#"tool memory_search {"query": "SECRET PRIVATE KEY"}"#;
    let (status, json) = setup.agent_json(search).await;
    assert!(status.success(), "{json}");
    let (status, json) = setup.agent_json(r#"tool read {"path": "USER.md"}"#).await;
    assert!(status.success(), "{json}");

    let calls = setup.model_calls();
    assert!(calls.len() >= 5, "{} model calls", calls.len());
    let system = calls[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Be kind, e2e soul."), "{system}");
    let everything = serde_json::to_string(&calls).unwrap();
    assert!(!everything.contains("SECRET-e2e-7f3a"), "{everything}");
    // The refusal names the file as the agent gave it: not where it leads, not the workspace.
    let read = last_tool_result(&calls);
    assert_eq!(
        read,
        "refused: USER.md leads outside the workspace through a symlink"
    );
    let outside_text = outside.display().to_string();
    assert!(!everything.contains(&outside_text), "{everything}");
}

/// The text of the last tool result the model was sent.
fn last_tool_result(calls: &[Value]) -> String {
    calls
        .iter()
        .flat_map(|c| c["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_default()
}
