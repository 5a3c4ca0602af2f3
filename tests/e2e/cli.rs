//! End-to-end: the first hour with the `chela` binary and an empty HOME (issue #12): the default
//! store does not move when a config file appears, `CHELA_MODEL`, URLs checked at load,
//! clap's suggestions, shell completions, `config show|init`, `pairing` channel names,
//! `sessions import` key grammar, the built-in gemini command.

use crate::common;

use std::path::Path;
use std::process::Output;

use chela_testkit::FakeModel;
use common::{KEY, chela_command, run_to_end};

/// Runs `chela <args>` with HOME `home`, no config file named, and `env` added.
async fn chela(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = chela_command(home);
    cmd.args(args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    run_to_end(cmd).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The default config file under HOME `home` (the platform config folder on Linux).
fn default_config(home: &Path) -> std::path::PathBuf {
    home.join(".config/chela/config.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_config_file_keeps_the_store_and_chela_model_picks_the_model() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await.unwrap();
    let base = fake.openai_base_url();
    let env = [("OPENAI_BASE_URL", base.as_str())];
    let out = chela(home.path(), &["agent", "--message", "first"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(home.path().join(".chela/data").is_dir());
    // The Ollama file of the getting-started page: only a model name.
    let config = default_config(home.path());
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[model]\nmodel = \"llama3.2\"\n").unwrap();
    let out = chela(home.path(), &["sessions", "list"], &env).await;
    let listed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        listed.contains(KEY),
        "the earlier session is still listed: {listed}"
    );
    assert!(
        !config.with_file_name("data").exists(),
        "no store beside the file"
    );
    // The file's model is used, and CHELA_MODEL overrides it.
    let out = chela(home.path(), &["agent", "--message", "second"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let with_model = [env[0], ("CHELA_MODEL", "qwen3:8b")];
    let out = chela(home.path(), &["agent", "--message", "third"], &with_model).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let models: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(models, ["gpt-4.1-mini", "llama3.2", "qwen3:8b"]);
}

#[tokio::test]
async fn a_url_without_its_scheme_is_refused_at_load_naming_the_variable_or_key() {
    let home = tempfile::tempdir().unwrap();
    let env = [("OPENAI_BASE_URL", "localhost:11434/v1")];
    let out = chela(home.path(), &["agent", "--message", "hi"], &env).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("chela: environment variable OPENAI_BASE_URL: \"localhost:11434/v1\""),
        "{stderr}"
    );
    assert!(stderr.contains("\"http://localhost:11434/v1\""), "{stderr}");
    assert!(
        !home.path().join(".chela/data").exists(),
        "stopped before the store"
    );
    let config = home.path().join("c.toml");
    std::fs::write(&config, "[model]\nbase_url = \"localhost:11434/v1\"\n").unwrap();
    let config = config.to_str().unwrap();
    let out = chela(home.path(), &["--config", config, "chat"], &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("chela: {config}:2:1: model.base_url: ")),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_mistyped_command_gets_a_suggestion() {
    let home = tempfile::tempdir().unwrap();
    let out = chela(home.path(), &["chta"], &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a similar subcommand exists: 'chat'"),
        "{stderr}"
    );
}

#[tokio::test]
async fn completions_are_printed_for_each_shell_even_with_a_broken_config() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("broken.toml");
    std::fs::write(&config, "[queue]\ncap = \"x\"\n").unwrap();
    let config = config.to_str().unwrap();
    for (shell, marker) in [
        ("bash", "_chela()"),
        ("zsh", "#compdef chela"),
        ("fish", "complete -c chela"),
    ] {
        let out = chela(
            home.path(),
            &["--config", config, "completions", shell],
            &[],
        )
        .await;
        let script = text(&out.stdout);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("sessions"), "{shell} completes subcommands");
    }
    let out = chela(home.path(), &["completions", "tcsh"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn completions_into_a_pipe_closed_early_end_quietly() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = chela_command(home.path());
    cmd.args(["completions", "bash"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // The reader is gone before chela writes (as `| head -1` once it has its line).
    drop(child.stdout.take());
    let out = tokio::time::timeout(common::WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr), "", "no panic, no message");
}

#[tokio::test]
async fn config_init_writes_the_example_once_and_show_names_the_paths() {
    let home = tempfile::tempdir().unwrap();
    let out = chela(home.path(), &["config", "init"], &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let path = default_config(home.path());
    let example = include_str!("../../config.example.toml");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), example);
    assert!(text(&out.stdout).contains(&path.display().to_string()));
    // Never overwritten.
    std::fs::write(&path, "[model]\nmodel = \"mine\"\n").unwrap();
    let out = chela(home.path(), &["config", "init"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("already exists"), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "[model]\nmodel = \"mine\"\n"
    );
    // --config names where it goes.
    let other = home.path().join("sub/other.toml");
    let args = ["--config", other.to_str().unwrap(), "config", "init"];
    let out = chela(home.path(), &args, &[]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), example);

    let out = chela(home.path(), &["config", "show"], &[]).await;
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = home.path().join(".chela/data");
    for line in [
        format!("# config file: {}\n", path.display()),
        format!("# store: {}\n", store.display()),
        format!("# RPC discovery file: {}.rpc\n", store.display()),
        "model = \"mine\"\n".to_owned(),
    ] {
        assert!(shown.contains(&line), "{line:?} in\n{shown}");
    }
}

#[tokio::test]
async fn config_show_hides_tokens_and_keys() {
    let home = tempfile::tempdir().unwrap();
    let config = default_config(home.path());
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        "[model]\napi_key = \"sk-file-secret\"\n[rpc]\ntoken = \"rpc-secret\"\n",
    )
    .unwrap();
    let env = [
        ("TELEGRAM_BOT_TOKEN", "123:tg-secret"),
        ("DISCORD_BOT_TOKEN", "dc-secret"),
        ("CHELA_MODEL", "llama3.2"),
    ];
    let out = chela(home.path(), &["config", "show"], &env).await;
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for secret in ["sk-file-secret", "rpc-secret", "tg-secret", "dc-secret"] {
        assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
    }
    assert_eq!(shown.matches("token = \"<set>\"").count(), 3, "{shown}");
    assert!(shown.contains("api_key = \"<set>\""), "{shown}");
    assert!(shown.contains("(API key <set>)"), "{shown}");
    assert!(
        shown.contains("# model.model from CHELA_MODEL = \"llama3.2\""),
        "{shown}"
    );
    assert!(
        shown.contains("# environment: TELEGRAM_BOT_TOKEN is set"),
        "{shown}"
    );
    // --changed: only what the file and the environment set, secrets still hidden.
    let out = chela(home.path(), &["config", "show", "--changed"], &env).await;
    let changed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let keys: Vec<&str> = changed
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" = "))
        .collect();
    assert!(keys.contains(&"api_key = \"<set>\""), "{changed}");
    assert!(keys.contains(&"model = \"llama3.2\""), "{changed}");
    assert_eq!(
        keys.len(),
        6,
        "api_key, model, rpc.listen (CHELA_RPC_LISTEN), rpc and both channel tokens:\n{changed}"
    );
    assert!(!changed.contains("debounce_ms"), "{changed}");
}

#[tokio::test]
async fn pairing_refuses_an_unknown_channel() {
    let home = tempfile::tempdir().unwrap();
    for action in ["approve", "reject"] {
        let out = chela(home.path(), &["pairing", action, "telgram", "ABCD"], &[]).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("invalid value 'telgram'"), "{stderr}");
        assert!(
            stderr.contains("possible values: telegram, discord"),
            "{stderr}"
        );
    }
    assert!(
        !home.path().join(".chela/data").exists(),
        "refused before the store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_import_checks_the_key_and_stores_its_canonical_form() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await.unwrap();
    let env = [("OPENAI_BASE_URL", fake.openai_base_url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = chela(home.path(), &["agent", "--message", "hello"], &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = home.path().join("t.jsonl");
    let args = ["sessions", "export", KEY, "--out", file.to_str().unwrap()];
    let out = chela(home.path(), &args, &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = file.to_str().unwrap();
    for bad in [
        "tester",
        "agent:main",
        "agent:Bad Id:main",
        "agent:main:x:y:z:w:v",
    ] {
        let out = chela(
            home.path(),
            &["sessions", "import", bad, "--in", file],
            &env,
        )
        .await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid session key {bad:?}")),
            "{stderr}"
        );
    }
    let args = [
        "sessions",
        "import",
        "agent:main:Terminal:direct:Bob",
        "--in",
        file,
    ];
    let out = chela(home.path(), &args, &env).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = chela(home.path(), &["sessions", "list"], &env).await;
    let listed = text(&out.stdout);
    assert!(
        listed.contains("agent:main:terminal:direct:bob\t"),
        "{listed}"
    );
    assert!(!listed.contains("Bob"), "{listed}");
}

#[tokio::test]
async fn the_gemini_harness_uses_the_acp_flag() {
    let home = tempfile::tempdir().unwrap();
    let out = chela(home.path(), &["acp", "agents"], &[]).await;
    let listed = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(listed.contains("gemini: gemini --acp "), "{listed}");
    assert!(!listed.contains("experimental"), "{listed}");
}
