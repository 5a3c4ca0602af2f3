//! Conformance of chela's MCP client with the reference filesystem server
//! (`@modelcontextprotocol/server-filesystem` 2026.8.31, installed by `scripts/test.sh` from
//! `tests/conformance/mcp/package-lock.json`), started by `chela chat` from `[mcp.servers]`
//! over stdio in the default sandbox: the fake model calls its tools as `files__<tool>` and
//! the chat gets their results, its own refusals (a path outside its folder) included.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Chat, Setup};

/// The server's program.
fn server() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/mcp/node_modules/.bin/mcp-server-filesystem");
    assert!(
        bin.exists(),
        "the MCP filesystem server is not installed at {}: run scripts/test.sh (it runs npm ci \
         in tests/conformance/mcp)",
        bin.display()
    );
    bin
}

/// Sends a tool directive; returns the `done:` answer's first line.
async fn call(chat: &mut Chat, tool: &str, args: &str) -> String {
    chat.send(&format!("tool files__{tool} {args}")).await;
    chat.wait_for("done:").await;
    format!("done:{}", chat.wait_for("\n").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_filesystem_server_reads_writes_lists_and_refuses() {
    let setup = Setup::openai("followup").await;
    let notes = setup.path("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.txt"), "hello from a file\n").unwrap();
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[mcp]\nstartup_timeout_s = 30\n[mcp.servers.files]\ncommand = {:?}\nargs = [{:?}]\n",
        server().display().to_string(),
        notes.display().to_string()
    ));
    std::fs::write(setup.config(), config).unwrap();
    let mut chat = setup.chat();
    let path = |name: &str| notes.join(name).display().to_string();

    let read = call(
        &mut chat,
        "read_text_file",
        &format!(r#"{{"path": "{}"}}"#, path("a.txt")),
    )
    .await;
    assert!(read.contains("done: hello from a file"), "{read}");
    let wrote = call(
        &mut chat,
        "write_file",
        &format!(
            r#"{{"path": "{}", "content": "written by the model"}}"#,
            path("b.txt")
        ),
    )
    .await;
    assert!(wrote.contains("Successfully wrote"), "{wrote}");
    assert_eq!(
        std::fs::read_to_string(notes.join("b.txt")).unwrap(),
        "written by the model"
    );
    let listed = call(
        &mut chat,
        "list_directory",
        &format!(r#"{{"path": "{}"}}"#, path("")),
    )
    .await;
    assert!(listed.contains("[FILE] a.txt"), "{listed}");
    // The server's own refusal comes back as a failed tool result.
    let outside = call(&mut chat, "read_text_file", r#"{"path": "/etc/hostname"}"#).await;
    assert!(outside.contains("Access denied"), "{outside}");
    let done = chat.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    let tools: Vec<String> = setup.model_calls()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .filter(|name| name.starts_with("files__"))
        .collect();
    assert!(tools.len() >= 10, "{tools:?}");
}
