//! What a build without an optional feature says when asked for a part it left out
//! (docs/development.md, "Features"). These tests exist only in such a build: `.ci/run` runs
//! them in the default build, which has none (`cargo test --bins`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// A config file holding `text`, loaded with no environment.
#[cfg(any(
    not(feature = "postgres"),
    not(feature = "sled"),
    not(feature = "slack")
))]
fn load(text: &str) -> Result<chela::config::LoadedConfig, chela::config::ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    chela::config::Config::load_with_env(Some(&path), &|_| None)
}

#[cfg(not(feature = "postgres"))]
#[test]
fn a_store_url_is_refused_naming_the_postgres_feature() {
    let err = load("[store]\nurl = \"postgres://chela@127.0.0.1/chela\"\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("store.url"), "{text}");
    assert!(text.contains("cargo feature `postgres`"), "{text}");
}

#[cfg(not(feature = "sled"))]
#[test]
fn the_sled_engine_is_refused_naming_the_sled_feature() {
    let err = load("[store]\nengine = \"sled\"\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("store.engine"), "{text}");
    assert!(text.contains("cargo feature `sled`"), "{text}");
}

#[cfg(not(feature = "sled"))]
#[test]
fn a_folder_holding_a_sled_store_is_refused_naming_the_sled_feature() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("conf"), "segment_size: 524288\n").unwrap();
    let text = format!("[store]\npath = \"{}\"\n", data.display());
    let loaded = load(&text).unwrap();
    let err = chela::store::Store::open_config(&loaded.config).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("store.path"), "{text}");
    assert!(text.contains("cargo feature `sled`"), "{text}");
}

#[cfg(not(feature = "slack"))]
#[test]
fn slack_tokens_are_refused_naming_the_slack_feature() {
    let text = "[channels.slack]\nbot_token = \"xoxb-1\"\napp_token = \"xapp-1\"\n";
    let err = load(text).unwrap_err().to_string();
    assert!(err.contains("channels.slack"), "{err}");
    assert!(err.contains("cargo feature `slack`"), "{err}");
    // A config without them loads, and Slack stays listed (and refused) among the platforms.
    let config = load("[channels.slack]\nrequire_mention = true\n")
        .unwrap()
        .config;
    let slack = super::platforms::PLATFORMS
        .iter()
        .find(|p| p.name == "slack")
        .unwrap();
    assert!(!(slack.configured)(&config));
    let refused = (slack.build)(&config).err().unwrap();
    assert!(refused.contains("Slack channel"), "{refused}");
}

#[cfg(not(feature = "import-openclaw"))]
#[test]
fn import_parses_and_says_it_is_not_built() {
    use clap::Parser;
    let args = crate::Args::try_parse_from(["chela", "import", "openclaw", "/x"]).unwrap();
    assert!(matches!(args.command, crate::Command::Import { .. }));
    assert_eq!(
        super::not_built("chela import", "import-openclaw"),
        std::process::ExitCode::from(2)
    );
}
