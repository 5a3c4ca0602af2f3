//! End-to-end: `/metrics`, `/healthz` and `/readyz` of a running `chela gateway` with the
//! Telegram fake: readiness waits for Telegram, counters move by what happened (messages in,
//! replies out, runs, a 429, a delivery retry), the queue is empty again; `[log] file` gets
//! the log lines.

use crate::common;

use std::time::Duration;

use chela_testkit::{ChatSpec, FakeDiscord, FakeTelegram, UserSpec};
use common::{Chat, Setup, WAIT};

/// The gateway's RPC address, from its log line.
async fn rpc_address(chat: &Chat) -> String {
    let line = chat.wait_stderr_line("rpc listening on ").await;
    line.split("rpc listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned()
}

async fn get(address: &str, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://{address}{path}"))
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The value of the sample line `series` (name and labels, exactly) in a scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

/// Polls `path` until it answers `status`, failing after [`WAIT`].
async fn wait_status(address: &str, path: &str, status: u16) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (got, body) = get(address, path).await;
        if got == status {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} stayed {got}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_counters_follow_the_gateway() {
    let setup = Setup::openai("steer").await;
    // Telegram is unreachable at first: a port nobody listens on (yet).
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tg_addr = reserved.local_addr().unwrap();
    drop(reserved);
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[channels.telegram]\ntoken = \"{}\"\napi_url = \"http://{tg_addr}\"\nallow_from = [\"42\"]\n\
         poll_timeout_s = 1\nstreaming = \"off\"\n[log]\nfile = \"logs/gateway.log\"\n",
        FakeTelegram::TOKEN,
    ));
    std::fs::write(setup.config(), config).unwrap();
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let gateway = Chat::spawn(cmd);
    let address = rpc_address(&gateway).await;

    let (status, body) = get(&address, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    // A name the listener was not told about (DNS rebinding) is refused on every path.
    for path in ["/metrics", "/healthz", "/panel/login", "/ws"] {
        let status = reqwest::Client::new()
            .get(format!("http://{address}{path}"))
            .header("host", "rebound.example:18789")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 421, "{path}");
    }
    let (status, body) = get(&address, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("channel telegram: not connected"), "{body}");

    // Telegram comes up: the gateway gets ready.
    let tg = FakeTelegram::bind(tg_addr).await.unwrap();
    let body = wait_status(&address, "/readyz", 200).await;
    assert!(body.contains("\"ready\":true"), "{body}");

    // One 429 on the first send: the final is retried by the outbox.
    tg.inject_429(1, 1);
    for (i, text) in ["first", "second"].iter().enumerate() {
        tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), text);
        let answered = tg
            .wait_for(|t| t.sent(42).len() > i, Duration::from_secs(20))
            .await;
        assert!(answered, "no answer to {text}: {:?}", tg.sent(42));
    }
    // The delivery mark follows the send: wait until the counter says so.
    let deadline = tokio::time::Instant::now() + WAIT;
    let text = loop {
        let (status, text) = get(&address, "/metrics").await;
        assert_eq!(status, 200, "{text}");
        let delivered = sample(&text, "chela_replies_delivered_total{channel=\"telegram\"}");
        if delivered == Some(2.0) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let expect = [
        ("chela_inbound_messages_total{channel=\"telegram\"}", 2.0),
        ("chela_replies_delivered_total{channel=\"telegram\"}", 2.0),
        ("chela_runs_total{outcome=\"ok\"}", 2.0),
        (
            "chela_platform_rate_limited_total{channel=\"telegram\"}",
            1.0,
        ),
        ("chela_delivery_retries_total{channel=\"telegram\"}", 1.0),
        ("chela_model_call_duration_seconds_count", 2.0),
        ("chela_first_text_seconds_count", 2.0),
        ("chela_pending_turns", 0.0),
        ("chela_acp_sessions", 0.0),
        ("chela_channel_connected{channel=\"telegram\"}", 1.0),
    ];
    for (series, value) in expect {
        assert_eq!(sample(&text, series), Some(value), "{series} in\n{text}");
    }
    assert!(
        sample(&text, "chela_store_size_bytes").unwrap() > 0.0,
        "{text}"
    );
    // The fake model counts tokens; gpt-4.1-mini has a built-in price.
    let model = "provider=\"openai\",model=\"gpt-4.1-mini\"";
    for kind in ["input", "output"] {
        let series = format!("chela_model_tokens_total{{{model},kind=\"{kind}\"}}");
        assert!(
            sample(&text, &series).unwrap_or(0.0) > 0.0,
            "{series} in\n{text}"
        );
    }
    let cost = format!("chela_model_cost_usd_total{{{model}}}");
    assert!(
        sample(&text, &cost).unwrap_or(0.0) > 0.0,
        "{cost} in\n{text}"
    );
    assert!(
        !text.contains("=\"42"),
        "a chat id leaked into a label:\n{text}"
    );

    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
    // `[log] file`: the same lines as stderr, without colours.
    let log = std::fs::read_to_string(setup.path("logs/gateway.log")).unwrap();
    assert!(log.contains("rpc listening on "), "{log}");
    assert!(log.contains("telegram channel polling"), "{log}");
    assert!(!log.contains('\u{1b}'), "{log}");
}

/// Discord's `connected()` as `/readyz` and `/metrics` see it: ready once the gateway
/// connection is up, not ready while the Discord gateway is gone, ready again when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_discord_gateway_connection() {
    let setup = Setup::openai("steer").await;
    let dc = FakeDiscord::start().await.unwrap();
    let dc_addr = dc.addr();
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "\n[channels.discord]\ntoken = \"{}\"\napi_url = \"{}\"\ngateway_url = \"{}\"\n",
        dc.token(),
        dc.rest_url(),
        dc.gateway_url(),
    ));
    std::fs::write(setup.config(), config).unwrap();
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let gateway = Chat::spawn(cmd);
    let address = rpc_address(&gateway).await;
    wait_status(&address, "/readyz", 200).await;
    let (_, text) = get(&address, "/metrics").await;
    let up = "chela_channel_connected{channel=\"discord\"}";
    assert_eq!(sample(&text, up), Some(1.0), "{text}");

    // The Discord gateway goes away: the channel says so.
    dc.shutdown().await.unwrap();
    let body = wait_status(&address, "/readyz", 503).await;
    assert!(body.contains("channel discord: not connected"), "{body}");
    let (_, text) = get(&address, "/metrics").await;
    assert_eq!(sample(&text, up), Some(0.0), "{text}");

    // It comes back on the same address: serenity reconnects and the channel is ready again.
    let _dc = FakeDiscord::bind(dc_addr).await.unwrap();
    wait_status(&address, "/readyz", 200).await;

    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(done.status.success(), "{}", done.stderr);
}
