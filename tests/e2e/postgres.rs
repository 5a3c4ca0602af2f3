//! End-to-end, the store on PostgreSQL (`CHELA_STORE_URL`): `chela gateway` answers through
//! the fake Telegram, is killed with kill -9 mid-load and restarted, and every message gets
//! exactly one reply; a wrong password or a newer schema stops it with exit 2 and a message
//! naming the setting. Needs `CHELA_TEST_PG_URL` (scripts/test.sh starts the cluster).

use crate::common;

use common::count;
use common::pg::{fresh_store_url, test_url};
use common::telegram::{TgConfig, TgSetup, dm};

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n).map(|i| format!("tick {i} ")).collect()
}

const CHATS: std::ops::RangeInclusive<i64> = 101..=110;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_every_message_is_answered_once_across_a_kill_9() {
    let url = fresh_store_url().await;
    // `store.path` (where the RPC discovery file goes) is in a folder nothing created yet.
    let env = [
        ("CHELA_STORE_URL", url.as_str()),
        ("CHELA_STORE_PATH", "not/yet/there/data"),
    ];
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "dm_policy = \"open\"",
        ..TgConfig::default()
    })
    .await;
    // Each chat: a streamed answer, then a plain message queued behind it.
    for id in CHATS {
        let (chat, user) = dm(id, &format!("U{id}"));
        s.tg.user_sends(chat.clone(), user.clone(), "slow 300 10");
        s.tg.user_sends(chat, user, &format!("hello {id}"));
    }
    let mut gw = s.gateway_env(&env);
    // Mid-load: every chat's streamed preview was sent and edited (so it is journaled).
    gw.wait(&s, "an edited preview in every chat", |s| {
        CHATS
            .clone()
            .all(|id| s.sent(id).first().is_some_and(|m| m.edits > 0))
    })
    .await;
    gw.kill().await;
    let cut: usize = CHATS
        .clone()
        .filter(|id| !s.texts(*id).iter().any(|t| t.starts_with("ok: hello")))
        .count();
    assert!(cut > 0, "every chat was answered before the kill");

    let full = ticks(10);
    let want = |id: i64| vec![full.trim_end().to_owned(), format!("ok: hello {id}")];
    let texts = |s: &TgSetup, id: i64| -> Vec<String> {
        s.texts(id)
            .iter()
            .map(|t| t.trim_end().to_owned())
            .collect()
    };
    let mut gw = s.gateway_env(&env);
    gw.wait(&s, "both replies in every chat", |s| {
        CHATS.clone().all(|id| texts(s, id) == want(id))
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    // Exactly one reply per message, in order, in every chat; cut previews were taken back.
    for id in CHATS {
        assert_eq!(texts(&s, id), want(id), "chat {id}");
        assert_eq!(count(&s.texts(id).concat(), "tick 10"), 1, "chat {id}");
    }
    // Nothing is left to run or to send, as the store on PostgreSQL says.
    let mut status = s.setup.chela(&["status"]);
    status.envs(env);
    let out = common::run_to_end(status).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("pending turns: 0"), "{text}");
    assert!(text.contains("undelivered replies: 0"), "{text}");
    assert!(!text.contains(&password_of(&url)), "{text}");
    // And it was PostgreSQL that held them: a session per chat, nothing pending.
    let schema = url.rsplit("%3D").next().unwrap().to_owned();
    let (client, connection) = tokio_postgres::connect(&test_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let count = |table: &str| format!("SELECT count(*) FROM {schema}.{table}");
    let sessions: i64 = client
        .query_one(&count("sessions"), &[])
        .await
        .unwrap()
        .get(0);
    let pending: i64 = client
        .query_one(&count("pending"), &[])
        .await
        .unwrap()
        .get(0);
    let seen: i64 = client
        .query_one(&count("dedupe"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        (sessions, pending, seen),
        (CHATS.count() as i64, 0, 2 * CHATS.count() as i64)
    );
}

/// The password inside `url`.
fn password_of(url: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .password()
        .unwrap_or("<none>")
        .to_owned()
}

/// `url` with another password.
fn with_wrong_password(url: &str) -> String {
    let mut url = url::Url::parse(url).unwrap();
    url.set_password(Some("wrong-password-123")).unwrap();
    url.to_string()
}

#[tokio::test]
async fn a_wrong_password_exits_2_naming_the_setting() {
    let s = TgSetup::new("").await;
    let wrong = with_wrong_password(&test_url());
    // From the environment: the message names CHELA_STORE_URL.
    let mut cmd = s.setup.chela(&["gateway"]);
    cmd.env("CHELA_STORE_URL", &wrong);
    let out = common::run_to_end(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("CHELA_STORE_URL"), "{stderr}");
    assert!(stderr.contains("password"), "{stderr}");
    assert!(!stderr.contains("wrong-password-123"), "{stderr}");
    // From the file: the message names store.url.
    let config = std::fs::read_to_string(s.setup.config()).unwrap();
    let config = config.replacen("[store]\n", &format!("[store]\nurl = \"{wrong}\"\n"), 1);
    std::fs::write(s.setup.config(), config).unwrap();
    let out = s.setup.run(&["status"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("store.url"), "{stderr}");
    // `config show` hides the password.
    let out = s.setup.run(&["config", "show"]).await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("url = \"postgres://***@"), "{shown}");
    assert!(!shown.contains("wrong-password-123"), "{shown}");
    // Also when the URL comes from the environment (listed among the overrides).
    let mut cmd = s.setup.chela(&["config", "show"]);
    cmd.env("CHELA_STORE_URL", &wrong);
    let out = common::run_to_end(cmd).await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("store.url from CHELA_STORE_URL"), "{shown}");
    assert!(!shown.contains("wrong-password-123"), "{shown}");
}

#[tokio::test]
async fn a_database_with_a_newer_schema_is_refused_with_exit_2() {
    let s = TgSetup::new("").await;
    let url = fresh_store_url().await;
    let status = |url: &str| {
        let mut cmd = s.setup.chela(&["status"]);
        cmd.env("CHELA_STORE_URL", url);
        common::run_to_end(cmd)
    };
    let out = status(&url).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema = url.rsplit("%3D").next().unwrap().to_owned();
    let (client, connection) = tokio_postgres::connect(&test_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "UPDATE {schema}.chela_schema SET version = version + 1"
        ))
        .await
        .unwrap();
    let out = status(&url).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("newer than this chela's"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_the_same_database_is_refused_and_the_cli_asks_the_gateway() {
    let url = fresh_store_url().await;
    let env = [("CHELA_STORE_URL", url.as_str())];
    let s = TgSetup::with(TgConfig {
        telegram: "dm_policy = \"open\"",
        ..TgConfig::default()
    })
    .await;
    let (chat, user) = dm(201, "U201");
    s.tg.user_sends(chat, user, "hello");
    let mut gw = s.gateway_env(&env);
    gw.wait(&s, "the first reply", |s| {
        s.texts(201).iter().any(|t| t.starts_with("ok: hello"))
    })
    .await;

    // A second gateway on the same database stops at once, naming it without the password.
    let mut second = s.setup.chela(&["gateway"]);
    second.envs(env);
    let out = common::run_to_end(second).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in use by another chela process"),
        "{stderr}"
    );
    assert!(!stderr.contains(&password_of(&url)), "{stderr}");

    // The CLI reaches the running gateway over its RPC instead of opening the store.
    let mut status = s.setup.chela(&["status"]);
    status.envs(env);
    let out = common::run_to_end(status).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("gateway: running"), "{text}");

    // Once the gateway is gone, the store opens directly again.
    gw.stop().await;
    let mut status = s.setup.chela(&["status"]);
    status.envs(env);
    let out = common::run_to_end(status).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("gateway: running"), "{text}");
}

#[tokio::test]
async fn chat_on_a_cluster_config_exits_2_pointing_at_chela_agent() {
    let s = TgSetup::with(TgConfig {
        tables: "[cluster]\nenabled = true\n",
        ..TgConfig::default()
    })
    .await;
    let mut cmd = s.setup.chela(&["chat"]);
    cmd.env("CHELA_STORE_URL", fresh_store_url().await);
    let out = common::run_to_end(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("chela agent"), "{stderr}");
}
