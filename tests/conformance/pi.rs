//! Conformance: pi's own session loader (`@mariozechner/pi-coding-agent`, pinned in
//! tests/conformance/pi, installed by scripts/test.sh) loads what `chela sessions export`
//! writes, in both formats: real OpenClaw and pi files imported into chela, and a chela
//! transcript with a reset (pi sees only what follows it; the whole export imports back).

use crate::common;

use std::path::{Path, PathBuf};

use common::{chela_command, run_to_end};
use serde_json::Value;

/// The export formats, both loaded by pi.
const FORMATS: [&str; 2] = ["chela", "pi"];

/// The npm folder of pi's package.
fn install_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/pi");
    assert!(
        dir.join("node_modules/@mariozechner/pi-coding-agent/package.json")
            .exists(),
        "pi is not installed in {}/node_modules: run scripts/test.sh (it runs npm ci there)",
        dir.display()
    );
    dir
}

/// Runs `chela <args>` with HOME `home`; asserts success and returns stdout.
async fn chela(home: &Path, args: &[&str]) -> String {
    let mut cmd = chela_command(home);
    cmd.args(args);
    let out = run_to_end(cmd).await;
    assert!(
        out.status.success(),
        "chela {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Exports `key` in `format` into `home` and loads it with pi's loader.
async fn load_with_pi(home: &Path, key: &str, format: &str) -> Value {
    let file = home.join("export.jsonl");
    chela(
        home,
        &[
            "sessions",
            "export",
            key,
            "--format",
            format,
            "--out",
            file.to_str().unwrap(),
        ],
    )
    .await;
    let dir = install_dir();
    let out = tokio::process::Command::new("node")
        .arg(dir.join("load.mjs"))
        .arg(&file)
        .current_dir(&dir)
        .output()
        .await
        .expect("node runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn texts(loaded: &Value) -> Vec<(String, String)> {
    loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn pi_loads_the_export_of_imported_pi_and_openclaw_files() {
    let home = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let key = "agent:main:terminal:direct:pi";
    let pi_file = fixtures.join("pi/branched-v3.jsonl");
    chela(
        home.path(),
        &["sessions", "import", key, "--in", pi_file.to_str().unwrap()],
    )
    .await;
    for format in FORMATS {
        let loaded = load_with_pi(home.path(), key, format).await;
        assert_eq!(
            texts(&loaded),
            [
                ("user".to_string(), "hello as a plain string".to_string()),
                ("assistant".into(), "ok: hello as a plain string".into()),
                ("user".into(), "Remember to be brief.".into()),
                ("user".into(), "second try on another branch".into()),
                (
                    "assistant".into(),
                    "ok: second try on another branch".into()
                ),
            ]
        );
        assert_eq!(loaded["messages"][1]["api"], "openai-completions");
        assert_eq!(loaded["messages"][1]["usage"]["totalTokens"], 15);
    }

    let key = "agent:main:terminal:direct:oc";
    let oc_file = fixtures.join("openclaw/session-v4.jsonl");
    chela(
        home.path(),
        &["sessions", "import", key, "--in", oc_file.to_str().unwrap()],
    )
    .await;
    for format in FORMATS {
        let loaded = load_with_pi(home.path(), key, format).await;
        let users: Vec<String> = texts(&loaded)
            .into_iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, text)| text)
            .collect();
        assert_eq!(
            users,
            ["hello there", "second turn", "/reset", "after reset"]
        );
    }
}

#[tokio::test]
async fn pi_sees_nothing_from_before_a_reset() {
    let home = tempfile::tempdir().unwrap();
    let transcript = concat!(
        r#"{"type":"session","version":4,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","id":"00000001","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"secret before reset"}],"timestamp":1}}"#,
        "\n",
        r#"{"type":"reset","id":"00000002","parentId":"00000001","timestamp":"2026-01-01T00:00:02.000Z","reason":"/reset"}"#,
        "\n",
        r#"{"type":"message","id":"00000003","parentId":"00000002","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":[{"type":"text","text":"fresh start"}],"timestamp":3}}"#,
        "\n",
        r#"{"type":"message","id":"00000004","parentId":"00000003","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok: fresh start"}],"provider":"openai","model":"m","usage":{"input":5,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":7},"stopReason":"stop","timestamp":4}}"#,
        "\n",
    );
    let file = home.path().join("chela.jsonl");
    std::fs::write(&file, transcript).unwrap();
    let key = "agent:main:terminal:direct:r";
    chela(
        home.path(),
        &["sessions", "import", key, "--in", file.to_str().unwrap()],
    )
    .await;
    for format in FORMATS {
        let loaded = load_with_pi(home.path(), key, format).await;
        assert_eq!(
            texts(&loaded),
            [
                ("user".to_string(), "fresh start".to_string()),
                ("assistant".into(), "ok: fresh start".into()),
            ],
            "{format}"
        );
        assert_eq!(loaded["messages"][1]["api"], "openai-completions");
    }
    // The default export keeps the whole transcript, reset included: the entry after the reset
    // is a new root, and the answer carries pi's fields.
    let full = chela(home.path(), &["sessions", "export", key]).await;
    let lines: Vec<Value> = full
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{full}");
    assert!(full.contains("secret before reset"));
    assert_eq!(lines[3]["parentId"], Value::Null);
    assert_eq!(lines[4]["parentId"], "00000003");
    assert_eq!(lines[4]["message"]["usage"]["cost"]["total"], 0);
    // It imports back whole, and exports the same again.
    let copy = home.path().join("copy.jsonl");
    std::fs::write(&copy, &full).unwrap();
    let again = "agent:main:terminal:direct:r2";
    chela(
        home.path(),
        &["sessions", "import", again, "--in", copy.to_str().unwrap()],
    )
    .await;
    assert_eq!(
        chela(home.path(), &["sessions", "export", again]).await,
        full
    );
}
