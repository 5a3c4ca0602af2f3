//! End-to-end: moving over from OpenClaw and pi (issue #17) with the `chela` binary and an
//! empty HOME: `chela import openclaw` on a real OpenClaw 2026.9.6 state folder
//! (tests/fixtures/openclaw), and `chela sessions import|show|export` on real OpenClaw and pi
//! session files.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{chela_command, run_to_end};

/// Runs `chela <args>` with HOME `home`.
async fn chela(home: &Path, args: &[&str]) -> Output {
    let mut cmd = chela_command(home);
    cmd.args(args);
    run_to_end(cmd).await
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn import_openclaw_writes_config_sessions_and_pairing() {
    let home = tempfile::tempdir().unwrap();
    // A copy: the import must not need to write into OpenClaw's folder.
    let state = home.path().join("oc");
    copy_dir(&fixture("openclaw/state"), &state);
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.contains("sessions imported: 2, entries: 12"), "{text}");
    assert!(text.contains("paired senders carried over: 3"), "{text}");
    // The second agent becomes an [[agents]] entry.
    assert!(text.contains("+ id = \"ops\""), "{text}");
    assert!(text.contains("× thinking_level_change"), "{text}");
    assert!(
        text.contains("+ token = \"123456:telegram-fixture-token\""),
        "{text}"
    );

    let kept = home
        .path()
        .join(".chela/imported/openclaw/agent_main_terminal_direct_fixture-one.jsonl");
    let kept = std::fs::read_to_string(kept).unwrap();
    assert!(kept.contains("\"thinking_level_change\""), "{kept}");
    assert_eq!(kept.lines().count(), 16);

    let config = std::fs::read_to_string(home.path().join(".config/chela/config.toml")).unwrap();
    assert!(
        config.contains("base_url = \"http://127.0.0.1:18991/v1\""),
        "{config}"
    );
    assert!(config.contains("mode = \"collect\""), "{config}");

    // A later `chela` with no --config finds it where it looks by default.
    let shown = chela(home.path(), &["config", "show"]).await;
    assert!(
        stdout(&shown).contains("http://127.0.0.1:18991/v1"),
        "{}\n{}",
        stdout(&shown),
        stderr(&shown)
    );

    let list = chela(home.path(), &["sessions", "list"]).await;
    let listed = stdout(&list);
    assert!(
        listed.contains("agent:main:telegram:direct:12345\tagent main\t3 entries"),
        "{listed}"
    );
    assert!(
        listed.contains("agent:main:terminal:direct:fixture-one\tagent main\t9 entries"),
        "{listed}"
    );
    let show = chela(
        home.path(),
        &["sessions", "show", "agent:main:terminal:direct:fixture-one"],
    )
    .await;
    assert!(stdout(&show).contains("after reset"), "{}", stdout(&show));

    // Pairing carried over: the store knows the approved senders.
    let mut config = chela::config::Config::load_with_env(
        Some(&home.path().join(".config/chela/config.toml")),
        &|_| None,
    )
    .unwrap();
    // The default store path follows the process's HOME: point it at the test's.
    config.config.store.path = home.path().join(".chela/data");
    let store = chela::store::Store::open_config(&config.config).unwrap();
    assert!(store.is_paired("telegram", "default", "12345").unwrap());
    assert!(store.is_paired("telegram", "default", "67890").unwrap());
    assert!(
        store
            .is_paired("discord", "default", "111222333444555666")
            .unwrap()
    );
    assert!(
        !store
            .is_paired("telegram", "default", "111222333444555666")
            .unwrap()
    );
    drop(store);

    // Again: the config is there (unchanged: nothing to write) and the sessions exist.
    let again = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    let text = stdout(&again);
    assert!(
        text.contains("already holds the imported settings"),
        "{text}"
    );
    assert!(text.contains("sessions imported: 0"), "{text}");
}

#[tokio::test]
async fn a_different_config_is_not_replaced_without_force() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/chela/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[queue]\ncap = 3\n").unwrap();
    let state = fixture("openclaw/state");
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    let text = stdout(&out);
    assert!(text.contains("- cap = 3"), "{text}");
    assert!(
        text.contains("left as it is (--force writes the imported settings into it"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "[queue]\ncap = 3\n"
    );
    let forced = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap(), "--force"],
    )
    .await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("cap = 10")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_gateway_is_named_before_anything_is_written() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/chela/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[model]\nprovider = \"echo\"\n").unwrap();
    let mut cmd = chela_command(home.path());
    // No model is called; the gateway only needs one configured to start.
    cmd.args(["gateway"])
        .env("RUST_LOG", "info")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", "unused");
    let gateway = common::Chat::spawn(cmd);
    gateway.wait_stderr_line("chela ready").await;
    let state = fixture("openclaw/state");
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap(), "--force"],
    )
    .await;
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("stop the gateway first"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "[model]\nprovider = \"echo\"\n",
        "the config is left as it was"
    );
    assert!(done.status.success(), "{}", done.stderr);
}

#[tokio::test]
async fn real_openclaw_and_pi_files_import_show_and_export() {
    let home = tempfile::tempdir().unwrap();
    for (key, file, shown) in [
        (
            "agent:main:terminal:direct:oc",
            "openclaw/session-v4.jsonl",
            "second turn",
        ),
        (
            "agent:main:terminal:direct:pi",
            "pi/branched-v3.jsonl",
            "second try on another branch",
        ),
    ] {
        let path = fixture(file);
        let out = chela(
            home.path(),
            &["sessions", "import", key, "--in", path.to_str().unwrap()],
        )
        .await;
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        assert!(stderr(&out).contains("not carried over: 1 × thinking_level_change"));
        let show = chela(home.path(), &["sessions", "show", key]).await;
        assert!(stdout(&show).contains(shown), "{}", stdout(&show));
        let export = chela(home.path(), &["sessions", "export", key]).await;
        let exported = stdout(&export);
        let header: serde_json::Value =
            serde_json::from_str(exported.lines().next().unwrap()).unwrap();
        assert_eq!(header["version"], 4);
        assert!(exported.contains(shown));
    }
}

#[tokio::test]
async fn force_keeps_the_settings_the_import_does_not_write() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config/chela/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let store = home.path().join("elsewhere");
    let before = format!(
        "[store]\npath = \"{}\"\n[rpc]\nlisten = \"127.0.0.1:0\"\n[queue]\ncap = 3\ndrop = \"old\"\n",
        store.display()
    );
    std::fs::write(&config, &before).unwrap();
    let state = home.path().join("oc");
    copy_dir(&fixture("openclaw/state"), &state);
    let with = |args: &[&str]| {
        let mut all = vec!["--config", config.to_str().unwrap()];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let args = with(&["import", "openclaw", state.to_str().unwrap(), "--force"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = chela(home.path(), &args).await;
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("sessions imported: 2"),
        "{}",
        stdout(&out)
    );
    let written: toml::Table = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        written["store"]["path"].as_str(),
        Some(store.to_str().unwrap())
    );
    assert_eq!(written["rpc"]["listen"].as_str(), Some("127.0.0.1:0"));
    assert_eq!(written["queue"]["cap"].as_integer(), Some(10), "imported");
    assert_eq!(written["queue"]["drop"].as_str(), Some("old"), "kept");
    assert_eq!(
        std::fs::read_to_string(home.path().join(".config/chela/config.toml.before-import"))
            .unwrap(),
        before
    );
    // The sessions went to the configured store, not to the default one.
    assert!(chela::store::holds_redb(&store));
    assert!(!chela::store::holds_redb(&home.path().join(".chela/data")));
    let args = with(&["sessions", "list"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let list = chela(home.path(), &args).await;
    assert!(
        stdout(&list).contains("agent:main:telegram:direct:12345"),
        "{}",
        stdout(&list)
    );
}

/// A zstd frame of `total` bytes of spaces in RLE blocks of 128 KiB: 4 bytes per block, so
/// 64 MiB take 2 KiB (a decompression bomb).
fn zstd_bomb(total: usize) -> Vec<u8> {
    const BLOCK: usize = 128 * 1024;
    // Magic, a frame header with only a window descriptor (128 KiB), then the blocks.
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    let blocks = total / BLOCK;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = ((BLOCK as u32) << 3) | (1 << 1) | last;
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(b' ');
    }
    out
}

/// An OpenClaw folder whose one agent database holds a session with a header row and
/// `row` (compressed) as its second row.
fn state_with_row(root: &Path, row: &[u8]) -> PathBuf {
    let state = root.join("oc");
    let agent = state.join("agents/main/agent");
    std::fs::create_dir_all(&agent).unwrap();
    let conn = rusqlite::Connection::open(agent.join("openclaw-agent.sqlite")).unwrap();
    conn.execute_batch(
        "CREATE TABLE session_windows (session_id TEXT, session_key TEXT, created_at INTEGER);
         CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, event_zstd BLOB);
         INSERT INTO session_windows VALUES ('w1', 'agent:main:main', 1);",
    )
    .unwrap();
    let header = r#"{"type":"session","version":4,"id":"w","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;
    conn.execute(
        "INSERT INTO transcript_events VALUES ('w1', 0, ?1, NULL)",
        [header],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO transcript_events VALUES ('w1', 1, NULL, ?1)",
        [row],
    )
    .unwrap();
    state
}

#[tokio::test]
async fn a_compressed_row_that_expands_past_the_limit_is_refused_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let bomb = zstd_bomb(64 << 20);
    assert!(bomb.len() < 4096);
    let state = state_with_row(home.path(), &bomb);
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}\n{err}", stdout(&out));
    assert!(
        err.contains(
            "openclaw-agent.sqlite: session agent:main:main, row seq 1 expands past 16 MiB"
        ),
        "{err}"
    );
    assert!(
        !home.path().join(".config/chela/config.toml").exists(),
        "nothing written"
    );
}

#[tokio::test]
async fn session_files_that_are_links_fifos_or_devices_are_refused_naming_them() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("oc");
    let sessions = state.join("agents/main/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    // A link to /dev/zero: reading it whole would never end (until memory does).
    std::os::unix::fs::symlink("/dev/zero", sessions.join("zero.jsonl")).unwrap();
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("zero.jsonl is a symbolic link, not a regular file"),
        "{}",
        stderr(&out)
    );

    // A FIFO: opening it to read would wait for a writer forever.
    std::fs::remove_file(sessions.join("zero.jsonl")).unwrap();
    let fifo = sessions.join("fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let out = chela(
        home.path(),
        &["import", "openclaw", state.to_str().unwrap()],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("fifo.jsonl is a FIFO, not a regular file"),
        "{}",
        stderr(&out)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
