//! Helpers of the cluster end-to-end tests (several `chela gateway` nodes on one
//! PostgreSQL): free ports for the nodes' webhook listeners, a round-robin proxy in front
//! of them, posting Telegram updates to a webhook as Telegram does, starting the nodes, and
//! reading the store's tables.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chela_testkit::FakeTelegram;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

use super::pg::test_url;
use super::{Chat, Setup};

/// The webhook secret the nodes' configs set (`webhook_secret`).
pub const SECRET: &str = "s3cret";

/// A free local port below the kernel's ephemeral range (32768 and up on Linux), so no
/// outgoing connection (a node's PostgreSQL pool, say) can take it between this check and
/// the node's own bind. Ports are tried from a start that differs per process.
pub fn free_port() -> u16 {
    use std::sync::atomic::AtomicU16;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let start = (std::process::id() % 10_000) as u16;
    for _ in 0..12_000 {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        let port = 20_000 + offset;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 20000 and 32000");
}

/// A round-robin TCP proxy on `listener` over `backends`; a backend that refuses the
/// connection (a killed node) is skipped.
pub fn proxy(listener: TcpListener, backends: Vec<String>) {
    let next = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let (backends, next) = (backends.clone(), next.clone());
            tokio::spawn(async move {
                for _ in 0..backends.len() {
                    let i = next.fetch_add(1, Ordering::Relaxed) % backends.len();
                    if let Ok(mut outbound) = TcpStream::connect(&backends[i]).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        return;
                    }
                }
            });
        }
    });
}

/// POSTs update `body` once to the webhook at `addr` (with [`SECRET`]); the HTTP status,
/// 0 when the connection failed.
pub async fn post_once(addr: &str, body: &str) -> u16 {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return 0;
    };
    let request = format!(
        "POST /tg/hook HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         X-Telegram-Bot-Api-Secret-Token: {SECRET}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut response = String::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(20),
        stream.read_to_string(&mut response),
    )
    .await;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// POSTs update `body` to the webhook at `addr` until it is acknowledged with 200 (as
/// Telegram retries), every 200 ms; panics after 100 tries.
pub async fn post(addr: &str, body: &str) {
    for _ in 0..100 {
        if post_once(addr, body).await == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the webhook at {addr} did not take {body}");
}

/// Update `n` of `chat` (private when positive, a group otherwise) from user `from`, with
/// a leading mention of the bot when `mention`; its update id is `|chat| * 1000 + n`.
pub fn update(chat: i64, from: i64, n: i64, text: &str, mention: bool) -> String {
    let kind = if chat > 0 {
        format!(r#""type": "private", "first_name": "U{chat}""#)
    } else {
        r#""type": "group", "title": "Team""#.to_owned()
    };
    let (text, entities) = if mention {
        let handle = format!("@{}", FakeTelegram::BOT_USERNAME);
        let entity = json!([{"type": "mention", "offset": 0, "length": handle.len()}]);
        (
            format!("{handle} {text}"),
            format!(r#", "entities": {entity}"#),
        )
    } else {
        (text.to_owned(), String::new())
    };
    let text = serde_json::to_string(&text).unwrap();
    format!(
        r#"{{"update_id": {}, "message": {{"message_id": {n}, "date": 1700000000,
        "chat": {{"id": {chat}, {kind}}},
        "from": {{"id": {from}, "is_bot": false, "first_name": "U{from}"}}, "text": {text}{entities}}}}}"#,
        chat.abs() * 1000 + n
    )
}

/// A client of the test database.
async fn connect() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&test_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Rows of `sql` on the test database; none when it fails (the store's schema is not
/// migrated yet). Where the schema must exist, [`query_checked`].
pub async fn query(sql: &str) -> Vec<tokio_postgres::Row> {
    connect().await.query(sql, &[]).await.unwrap_or_default()
}

/// Rows of `sql` on the test database; fails the test when it fails (where the store's
/// schema must exist, so that no error reads as "no rows").
pub async fn query_checked(sql: &str) -> Vec<tokio_postgres::Row> {
    let rows = connect().await.query(sql, &[]).await;
    rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// When the soonest of node `node`'s unexpired leases (partitions and intakes) in `schema`
/// runs out, in ms of the database's clock: the latest a takeover waiting for leases to
/// expire could begin. `None` when it holds none.
pub async fn first_lease_end_ms(schema: &str, node: &str) -> Option<i64> {
    let sql = format!(
        "SELECT (extract(epoch FROM min(expires)) * 1000)::bigint FROM \
         (SELECT expires FROM {schema}.leases WHERE node = '{node}' AND expires > now() \
         UNION ALL SELECT expires FROM {schema}.intake_leases WHERE node = '{node}' \
         AND expires > now()) AS held"
    );
    query_checked(&sql).await.first().and_then(|r| r.get(0))
}

/// The database's clock now, in ms.
pub async fn db_now_ms() -> i64 {
    let rows = query_checked("SELECT (extract(epoch FROM now()) * 1000)::bigint").await;
    rows[0].get(0)
}

/// Runs `sql` on the test database; how many rows it changed (fails the test when it fails).
pub async fn execute(sql: &str) -> u64 {
    connect().await.execute(sql, &[]).await.unwrap()
}

/// Runs `future` to its end on a runtime of its own, in a thread of its own: for a
/// synchronous predicate (`wait_for`'s) that reads the store.
pub fn block_on<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || tokio::runtime::Runtime::new().unwrap().block_on(future))
        .join()
        .unwrap()
}

/// `chela --config node{i}.toml <sub>` in `setup`, having written `config` there, on the
/// store `url` with its local files under `data{i}`.
pub fn node_command(setup: &Setup, config: &str, url: &str, i: usize, sub: &str) -> Command {
    let path = setup.path(&format!("node{i}.toml"));
    std::fs::write(&path, config).expect("write the node's config");
    let mut cmd = super::chela_command(&setup.path(""));
    cmd.arg("--config").arg(&path).arg(sub);
    cmd.env("CHELA_STORE_URL", url)
        .env("CHELA_STORE_PATH", format!("data{i}"));
    cmd
}

/// `chela status` beside the nodes (a cluster shares the store), with node `i`'s config
/// (written already) and local files of its own.
pub fn status_command(setup: &Setup, url: &str, i: usize) -> Command {
    let mut cmd = super::chela_command(&setup.path(""));
    cmd.arg("--config")
        .arg(setup.path(&format!("node{i}.toml")))
        .arg("status")
        .env("CHELA_STORE_URL", url)
        .env("CHELA_STORE_PATH", "data-status");
    cmd
}

/// Starts `chela gateway` as cluster node `node{i}` of `setup`: its config is `base` (the
/// setup's, with `[cluster] enabled = true`) with `node_id` added, its store `url`, its local
/// files under `data{i}` and its log filter `rust_log`.
pub fn start_node(setup: &Setup, base: &str, url: &str, i: usize, rust_log: &str) -> Chat {
    let config = base.replace(
        "enabled = true",
        &format!("enabled = true\nnode_id = \"node{i}\""),
    );
    let mut cmd = node_command(setup, &config, url, i, "gateway");
    cmd.env("RUST_LOG", rust_log);
    Chat::spawn(cmd)
}

/// The schema of a store URL made by [`super::pg::fresh_store_url`].
pub fn schema_of(url: &str) -> String {
    url.rsplit("%3D").next().unwrap().to_owned()
}
