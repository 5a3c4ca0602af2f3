#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, "config.toml", &no_env)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn defaults_match_the_spec() {
    let c = Config::default();
    assert_eq!(c.store.path, PathBuf::from("~/.chela/data"));
    assert_eq!(c.model.provider, ProviderKind::OpenAi);
    assert_eq!(c.model.max_tokens, 4096);
    assert_eq!(c.agent.id, "main");
    assert_eq!(c.agent.timeout_s, 600);
    assert_eq!(c.session.dm_scope, DmScope::PerChannelPeer);
    assert_eq!(c.queue.mode, QueueMode::Steer);
    assert_eq!((c.queue.debounce_ms, c.queue.cap), (500, 20));
    assert_eq!(c.queue.drop, DropPolicy::Summarize);
    assert_eq!(parse("").unwrap(), c);
    c.validate().unwrap();
    assert_eq!(c.resolved_max_concurrent_runs(), 64);
}

#[test]
fn example_file_equals_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let loaded = Config::load_with_env(Some(&path), &no_env).unwrap();
    let mut expected = Config::default();
    expected.resolve_paths(&loaded.base_dir, dirs::home_dir().as_deref());
    expected.config_file = Some(path.clone());
    assert_eq!(loaded.config, expected);
    assert_eq!(loaded.source.as_deref(), Some(path.as_path()));
    assert_eq!(loaded.base_dir, Path::new(env!("CARGO_MANIFEST_DIR")));
}

#[test]
fn example_file_names_every_key() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml"))
            .unwrap();
    let value: toml::Table = toml::from_str(&substitute(&text, &no_env).unwrap()).unwrap();
    let defaults = toml::Table::try_from(Config::default()).unwrap();
    for (table, keys) in &defaults {
        let keys = keys.as_table().unwrap();
        let example = value[table].as_table().unwrap();
        for key in keys.keys() {
            assert!(example.contains_key(key), "{table}.{key} missing");
        }
    }
    assert!(text.contains("identity_links = {}"));
}

#[test]
fn env_substitution_with_defaults_and_escaping() {
    let lookup = env(&[("TOKEN", "a\"b\\c\nd"), ("EMPTY", ""), ("N", "7")]);
    let out = substitute(
        "a = \"${TOKEN}\"\nb = \"${MISSING}\"\nc = \"${MISSING:-x y}\"\nd = ${N}\ne = \"${EMPTY:-z}\"\nf = \"$${LIT}\" # $5",
        &lookup,
    )
    .unwrap();
    assert_eq!(
        out,
        "a = \"a\\\"b\\\\c\\nd\"\nb = \"\"\nc = \"x y\"\nd = 7\ne = \"z\"\nf = \"${LIT}\" # $5"
    );
    let table: toml::Table = toml::from_str(&out).unwrap();
    assert_eq!(table["a"].as_str(), Some("a\"b\\c\nd"));

    let c = Config::from_toml_str(
        "[model]\napi_key = \"${KEY}\"\nmax_tokens = ${MAX:-100}\n",
        "config.toml",
        &env(&[("KEY", "sk-\"x\"")]),
    )
    .unwrap();
    assert_eq!(c.model.api_key, "sk-\"x\"");
    assert_eq!(c.model.max_tokens, 100);
}

#[test]
fn bad_substitution_names_the_line() {
    let err = parse("[model]\napi_key = \"${1BAD}\"\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("config.toml:2:12: invalid variable reference"),
        "{text}"
    );
    let err = parse("a = \"${OPEN\"\n").unwrap_err();
    assert!(err.to_string().contains("unterminated"), "{err}");
}

#[test]
fn an_openai_compatible_server_named_as_provider_is_explained() {
    let err = parse("[model]\nprovider = \"ollama\"\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("provider = \"openai\" with base_url = \"http://localhost:11434/v1\""),
        "{text}"
    );
}

#[test]
fn unknown_key_names_key_and_line() {
    let err = parse("[store]\npath = \"x\"\n[model]\nprovidr = \"openai\"\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(
            "config.toml:4:1: model.providr: unknown key (did you mean provider?); expected one of provider, base_url"
        ),
        "{text}"
    );
    let err = parse("[telegram]\nbot_token = \"x\"\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("telegram: unknown key (channels go under [channels.telegram])"),
        "{err}"
    );
    let err = parse("[model]\nzzz = 1\n").unwrap_err();
    assert!(!err.to_string().contains("did you mean"), "{err}");
    let err = parse("[modle]\n").unwrap_err();
    assert!(err.to_string().starts_with("config.toml:1:"), "{err}");
    assert!(err.to_string().contains("modle: unknown key"), "{err}");
}

#[test]
fn wrong_type_names_key_and_line() {
    let err = parse("[queue]\nmode = \"steer\"\ndebounce_ms = \"abc\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config.toml:3:15: queue.debounce_ms: invalid value: string \"abc\", expected a number \
         of milliseconds or a duration such as \"500ms\""
    );
}

#[test]
fn invalid_enum_value_names_key() {
    let err = parse("[model]\nprovider = \"gemini\"\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("config.toml:2:12: model.provider: unknown value \"gemini\""),
        "{text}"
    );
    assert!(
        text.contains("openai, responses, anthropic, echo"),
        "{text}"
    );
    let err = parse("[queue]\ndrop = \"all\"\n").unwrap_err();
    assert!(err.to_string().contains("queue.drop"), "{err}");
    let err = parse("[session]\ndm_scope = \"per_peer\"\n").unwrap_err();
    assert!(err.to_string().contains("session.dm_scope"), "{err}");
}

#[test]
fn syntax_error_names_the_line() {
    let err = parse("[queue]\ncap = \n").unwrap_err();
    assert!(err.to_string().starts_with("config.toml:2:"), "{err}");
}

#[test]
fn validation_names_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "c.toml",
        "[agent]\nid = \"main\"\n\n[queue]\n  cap = 0\n",
    );
    let err = Config::load_with_env(Some(&path), &no_env).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:5:3: queue.cap: must be at least 1", path.display())
    );
    let mut c = Config::default();
    c.agent.id = "Bad Id".to_owned();
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .starts_with("agent.id:")
    );
    let mut c = Config::default();
    c.session
        .identity_links
        .insert("ana".into(), vec!["nocolon".into()]);
    assert!(c.validate().is_err());
}

#[test]
fn missing_explicit_file_is_an_error() {
    let err =
        Config::load_with_env(Some(Path::new("/nonexistent/chela.toml")), &no_env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "config file /nonexistent/chela.toml not found"
    );
    let lookup = env(&[("CHELA_CONFIG", "/nonexistent/other.toml")]);
    let err = Config::load_with_env(None, &lookup).unwrap_err();
    assert!(matches!(err, ConfigError::NotFound { .. }));
}

#[test]
fn chela_config_env_selects_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.toml", "[queue]\ncap = 3\n");
    let lookup = env(&[("CHELA_CONFIG", path.to_str().unwrap())]);
    let loaded = Config::load_with_env(None, &lookup).unwrap();
    assert_eq!(loaded.config.queue.cap, 3);
    assert_eq!(loaded.source, Some(path));
}

#[test]
fn relative_paths_resolve_against_the_file_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config.toml",
        "[store]\npath = \"db\"\n[agent]\nworkspace = \"ws\"\nskills_dirs = [\"sk\", \"/abs\"]\n",
    );
    let loaded = Config::load_with_env(Some(&path), &no_env).unwrap();
    let base = std::path::absolute(dir.path()).unwrap();
    assert_eq!(loaded.base_dir, base);
    assert_eq!(loaded.config.store.path, base.join("db"));
    assert_eq!(loaded.config.agent.workspace, base.join("ws"));
    assert_eq!(
        loaded.config.agent.skills_dirs,
        vec![base.join("sk"), PathBuf::from("/abs")]
    );
}

#[test]
fn chela_store_path_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "config.toml", "[store]\npath = \"db\"\n");
    let lookup = env(&[("CHELA_STORE_PATH", "/srv/chela")]);
    let loaded = Config::load_with_env(Some(&path), &lookup).unwrap();
    assert_eq!(loaded.config.store.path, PathBuf::from("/srv/chela"));
}

#[test]
fn a_config_file_does_not_move_the_default_store() {
    // The Ollama file of the getting-started page: only a model name. The store stays where it was without a file.
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "config.toml", "[model]\nmodel = \"llama3.2\"\n");
    let with_file = Config::load_with_env(Some(&path), &no_env).unwrap();
    let home = dirs::home_dir().unwrap();
    assert_eq!(with_file.config.store.path, home.join(".chela/data"));
    assert_eq!(with_file.base_dir, std::path::absolute(dir.path()).unwrap());
    // Only an explicit relative path is relative to the file.
    let path = write(dir.path(), "config.toml", "[store]\npath = \"data\"\n");
    let explicit = Config::load_with_env(Some(&path), &no_env).unwrap();
    assert_eq!(
        explicit.config.store.path,
        std::path::absolute(dir.path()).unwrap().join("data")
    );
}

#[test]
fn an_old_store_beside_the_config_file_is_kept_when_the_new_place_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("config-folder");
    let old = base.join("data");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("conf"), "segment_size: 524288").unwrap();
    let mut config = Config::default();
    config.store.path = dir.path().join("home/.chela/data");
    let notice = super::keep_old_store(&mut config, &base).expect("told");
    assert_eq!(config.store.path, old);
    assert!(notice.contains("set store.path"), "{notice}");
    // Once the new place holds a store, it wins.
    let mut config = Config::default();
    config.store.path = dir.path().join("home/.chela/data");
    std::fs::create_dir_all(&config.store.path).unwrap();
    assert!(super::keep_old_store(&mut config, &base).is_none());
    assert_eq!(config.store.path, dir.path().join("home/.chela/data"));
    // No old store: nothing to keep.
    let mut config = Config::default();
    config.store.path = dir.path().join("elsewhere");
    assert!(super::keep_old_store(&mut config, &dir.path().join("empty")).is_none());
}

#[test]
fn chela_model_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "config.toml", "[model]\nmodel = \"llama3.2\"\n");
    let lookup = env(&[("CHELA_MODEL", "qwen3:8b")]);
    let loaded = Config::load_with_env(Some(&path), &lookup).unwrap();
    assert_eq!(loaded.config.model.model, "qwen3:8b");
    let loaded = Config::load_with_env(Some(&path), &env(&[("CHELA_MODEL", "")])).unwrap();
    assert_eq!(loaded.config.model.model, "llama3.2", "empty: not set");
}

#[test]
fn a_url_in_the_file_without_its_scheme_names_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[model]\nbase_url = \"localhost:11434/v1\"\n",
            ":2:1: model.base_url: \"localhost:11434/v1\" must start with http:// or https://",
        ),
        (
            "[channels.telegram]\napi_url = \"api.telegram.org\"\n",
            ":2:1: channels.telegram.api_url: \"api.telegram.org\" is not a URL",
        ),
        (
            "[channels.telegram]\nwebhook_url = \"ftp://example.com/hook\"\n",
            ":2:1: channels.telegram.webhook_url: \"ftp://example.com/hook\" must start with http://",
        ),
        (
            "[channels.discord]\n\napi_url = \"discord.com\"\n",
            ":3:1: channels.discord.api_url: ",
        ),
        (
            "[channels.discord]\ngateway_url = \"https://gateway.discord.gg\"\n",
            ":2:1: channels.discord.gateway_url: \"https://gateway.discord.gg\" must start with wss:// or ws://",
        ),
    ];
    for (text, expected) in cases {
        let path = write(dir.path(), "c.toml", text);
        let err = Config::load_with_env(Some(&path), &no_env).unwrap_err();
        let expected = format!("{}{expected}", path.display());
        assert!(err.to_string().starts_with(&expected), "{err}\n{expected}");
    }
}

#[test]
fn a_bad_url_in_the_environment_names_the_variable() {
    let cases = [
        ("OPENAI_BASE_URL", "localhost:11434/v1"),
        ("CHELA_TELEGRAM_API_URL", "api.telegram.org"),
        ("CHELA_DISCORD_API_URL", "discord.com"),
        ("CHELA_DISCORD_GATEWAY_URL", "http://127.0.0.1:1/gateway"),
    ];
    for (name, value) in cases {
        let err = Config::load_with_env(None, &env(&[(name, value)])).unwrap_err();
        assert!(matches!(err, ConfigError::Env { .. }), "{err:?}");
        let text = err.to_string();
        let prefix = format!("environment variable {name}: {value:?} ");
        assert!(text.starts_with(&prefix), "{text}");
    }
    // OPENAI_BASE_URL is read only when model.base_url is empty and the provider is openai;
    // ANTHROPIC_BASE_URL only for anthropic.
    let dir = tempfile::tempdir().unwrap();
    let bad = env(&[
        ("OPENAI_BASE_URL", "localhost:1"),
        ("ANTHROPIC_BASE_URL", "localhost:2"),
    ]);
    let path = write(
        dir.path(),
        "c.toml",
        "[model]\nbase_url = \"http://127.0.0.1:11434/v1\"\n",
    );
    Config::load_with_env(Some(&path), &bad).unwrap();
    let path = write(dir.path(), "c.toml", "[model]\nprovider = \"anthropic\"\n");
    let err = Config::load_with_env(Some(&path), &bad).unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_BASE_URL"), "{err}");
    let good = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")]);
    Config::load_with_env(None, &good).unwrap();
}

#[test]
fn home_is_expanded() {
    let mut c = Config::default();
    c.resolve_paths(Path::new("/etc/chela"), Some(Path::new("/home/u")));
    assert_eq!(c.agent.workspace, PathBuf::from("/home/u/.chela/workspace"));
    assert_eq!(c.store.path, PathBuf::from("/home/u/.chela/data"));
    let mut c = Config::default();
    c.agent.workspace = PathBuf::from("~");
    c.resolve_paths(Path::new("/etc"), Some(Path::new("/home/u")));
    assert_eq!(c.agent.workspace, PathBuf::from("/home/u"));
}

#[test]
fn real_environment_is_used_by_load() {
    // `set_var` is unsafe (and unsafe code is forbidden), so rely on a unique unset name.
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config.toml",
        "[model]\nmodel = \"${CHELA_TEST_7F3A_MODEL:-fallback}\"\n",
    );
    let loaded = Config::load(Some(&path)).unwrap();
    assert_eq!(loaded.config.model.model, "fallback");
}

#[test]
fn queue_names_parse_for_the_queue_command() {
    assert_eq!("Collect".parse::<QueueMode>().unwrap(), QueueMode::Collect);
    assert_eq!(QueueMode::Followup.to_string(), "followup");
    assert_eq!("new".parse::<DropPolicy>().unwrap(), DropPolicy::New);
    let err = "bogus".parse::<QueueMode>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown queue mode \"bogus\"; expected one of steer, followup, collect, interrupt"
    );
    assert_eq!("per-peer".parse::<DmScope>().unwrap(), DmScope::PerPeer);
}

#[test]
fn hooks_parse_with_defaults_and_resolve_their_programs() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "config.toml",
        "[[hooks.before_tool]]\ncommand = [\"./guard.sh\", \"--strict\"]\ntools = [\"exec\"]\n\
         [[hooks.before_tool]]\ncommand = [\"logger\"]\ntimeout_s = 3\n\
         [[hooks.after_run]]\ncommand = [\"hooks/done\"]\n\
         [[hooks.after_tool]]\ncommand = [\"/usr/bin/true\"]\n",
    );
    let loaded = Config::load_with_env(Some(&path), &no_env).unwrap();
    let base = std::path::absolute(dir.path()).unwrap();
    let hooks = &loaded.config.hooks;
    assert_eq!(hooks.before_tool.len(), 2);
    let guard = &hooks.before_tool[0];
    assert_eq!(
        guard.command,
        [
            base.join("./guard.sh").display().to_string(),
            "--strict".into()
        ]
    );
    assert_eq!(
        (guard.tools.as_slice(), guard.timeout_s),
        (&["exec".to_owned()][..], 10)
    );
    assert!(guard.applies_to("exec") && !guard.applies_to("read"));
    let logger = &hooks.before_tool[1];
    assert_eq!(
        (logger.command[0].as_str(), logger.timeout_s),
        ("logger", 3)
    );
    assert!(logger.applies_to("read"));
    assert_eq!(
        hooks.after_run[0].command,
        [base.join("hooks/done").display().to_string()]
    );
    assert_eq!(hooks.after_tool[0].command, ["/usr/bin/true"]);
    assert!(hooks.before_run.is_empty());
}

#[test]
fn bad_hooks_name_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[hooks.before_tool]]\ncommand = [\"a\"]\n[[hooks.before_tool]]\ncommand = []\n",
            ":4:1: hooks.before_tool[1].command: must name a program",
        ),
        (
            "[[hooks.after_run]]\ntools = [\"exec\"]\n",
            ": hooks.after_run[0].command: must name a program",
        ),
        (
            "[[hooks.before_run]]\ncommand = [\"a\"]\ntools = [\"exec\"]\n",
            ":3:1: hooks.before_run[0].tools: only before_tool and after_tool",
        ),
        (
            "[[hooks.after_tool]]\ncommand = [\"a\"]\n  timeout_s = 0\n",
            ":3:3: hooks.after_tool[0].timeout_s: must be at least 1",
        ),
    ];
    for (text, expected) in cases {
        let path = write(dir.path(), "c.toml", text);
        let err = Config::load_with_env(Some(&path), &no_env).unwrap_err();
        let expected = format!("{}{expected}", path.display());
        assert!(err.to_string().starts_with(&expected), "{err}\n{expected}");
    }
    let err = parse("[[hooks.before_tool]]\ncommand = [\"a\"]\ntimeout = 3\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("config.toml:3:1: hooks.before_tool[0].timeout: unknown key"),
        "{err}"
    );
    let err = parse("[hooks]\nbefore = []\n").unwrap_err();
    assert!(
        err.to_string().contains("hooks.before: unknown key"),
        "{err}"
    );
}

#[test]
fn discord_shards_default_to_one_and_bad_values_name_the_key() {
    let shards = |text: &str| parse(text).map(|c| c.channels.discord.shard_count());
    assert_eq!(shards("").unwrap(), 1, "absent: one shard");
    assert_eq!(shards("[channels.discord]\nshards = 0\n").unwrap(), 1);
    assert_eq!(shards("[channels.discord]\nshards = 4\n").unwrap(), 4);
    for bad in ["-1", "\"two\"", "2.5"] {
        let err = parse(&format!("[channels.discord]\nshards = {bad}\n")).unwrap_err();
        assert!(
            err.to_string().contains("channels.discord.shards"),
            "{bad}: {err}"
        );
    }
    let config = parse("[channels.discord]\nshards = 5000\n").unwrap();
    let err = config.validate().unwrap_err().to_string();
    assert!(
        err.contains("channels.discord.shards") && err.contains("1024"),
        "{err}"
    );
}

#[test]
fn network_policies_parse_per_section_and_default_to_web() {
    let c = Config::default();
    for mode in [c.tools.exec.network, c.acp.network, c.hooks.network] {
        assert_eq!(mode, NetworkMode::Web);
    }
    assert_eq!(c.tools.exec.network.connect_ports(&[]), Some(vec![80, 443]));
    let c = parse(
        "[tools.exec]\nnetwork = \"none\"\nallow_ports = [22, 22]\n\
         [acp]\nnetwork = \"all\"\nallow_ports = [8080]\n\
         [hooks]\nallow_ports = [8443, 443]\n",
    )
    .unwrap();
    let exec = &c.tools.exec;
    assert_eq!(
        exec.network.connect_ports(&exec.allow_ports),
        Some(vec![22])
    );
    assert_eq!(c.acp.network.connect_ports(&c.acp.allow_ports), None);
    assert_eq!(
        c.hooks.network.connect_ports(&c.hooks.allow_ports),
        Some(vec![80, 443, 8443])
    );
    let err = parse("[tools.exec]\nnetwork = \"loopback\"\n").unwrap_err();
    assert!(err.to_string().contains("network"), "{err}");
    let err = parse("[acp]\nallow_ports = [70000]\n").unwrap_err();
    assert!(err.to_string().contains("allow_ports"), "{err}");
}

#[test]
fn prices_are_read_per_model_and_a_wrong_key_is_named() {
    let config = parse("[pricing.\"qwen2.5:7b\"]\ninput = 0\noutput = 0.5\n").unwrap();
    let entry = config.pricing["qwen2.5:7b"];
    assert_eq!(entry.output, crate::config::Rate(0.5));
    assert_eq!(entry.cache_read, None);
    let wrong = parse("[pricing.x]\ninput = 1\noutput = 1\ncached = 1\n").unwrap_err();
    assert!(wrong.to_string().contains("cached"), "{wrong}");
    for bad in ["-1", "nan", "inf"] {
        let text = format!("[pricing.x]\ninput = 1\noutput = {bad}\n");
        let wrong = parse(&text).unwrap().validate().unwrap_err().to_string();
        assert!(wrong.contains("pricing.x.output"), "{wrong}");
    }
}

#[test]
fn named_providers_and_fallbacks_are_checked() {
    let ok = parse(
        "[model]\nmodel = \"router/openai/gpt-4.1\"\nfallbacks = [\"anthropic/claude-x\"]\n\
         [providers.router]\nkind = \"openai\"\nbase_url = \"https://openrouter.ai/api/v1\"\n\
         api_keys = [\"a\", \"b\"]\nheaders = { \"HTTP-Referer\" = \"https://example.org\" }\n\
         [[agents]]\nid = \"coder\"\nfallbacks = [\"router/x\"]\n",
    )
    .unwrap();
    ok.validate().unwrap();
    assert_eq!(ok.providers["router"].api_keys, ["a", "b"]);
    assert_eq!(ok.for_agent("coder").unwrap().model.fallbacks, ["router/x"]);
    let shown = ok.redacted();
    assert_eq!(shown.providers["router"].api_keys, ["<set>", "<set>"]);
    assert_eq!(shown.providers["router"].headers["HTTP-Referer"], "<set>");
    let wrong = |text: &str| parse(text).unwrap().validate().unwrap_err().to_string();
    let bad_name = wrong("[providers.Big]\nkind = \"openai\"\n");
    assert!(bad_name.contains("providers.Big"), "{bad_name}");
    let bad_url = wrong("[providers.p]\nkind = \"openai\"\nbase_url = \"localhost:1\"\n");
    assert!(bad_url.contains("providers.p.base_url"), "{bad_url}");
    let bad_header = wrong("[providers.p]\nkind = \"openai\"\nheaders = { \"a b\" = \"x\" }\n");
    assert!(
        bad_header.contains("providers.p.headers.a b"),
        "{bad_header}"
    );
    let auth =
        wrong("[providers.p]\nkind = \"openai\"\nheaders = { Authorization = \"Bearer x\" }\n");
    assert!(auth.contains("providers.p.headers.Authorization"), "{auth}");
    let twice = wrong("[model]\napi_key = \"k\"\n[providers.openai]\nkind = \"openai\"\n");
    assert!(
        twice.contains("model.api_key") && twice.contains("[providers.openai]"),
        "{twice}"
    );
    let spaced = wrong("[model]\nfallbacks = [\"a model\"]\n");
    assert!(spaced.contains("model.fallbacks"), "{spaced}");
    let unknown = parse("[providers.p]\nkind = \"openai\"\nkey = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("key"), "{unknown}");
}
