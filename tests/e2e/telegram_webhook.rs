//! Telegram webhook mode through the real binary: the secret token is checked, an update is
//! acknowledged once durable and answered through the Bot API.

use crate::common;

use std::time::Duration;

use chela_testkit::{ChatSpec, FakeTelegram};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// POSTs `body` to `addr` + `path` with the secret header; returns the HTTP status code.
async fn post(addr: &str, path: &str, secret: &str, body: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         X-Telegram-Bot-Api-Secret-Token: {secret}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_updates_need_the_secret_and_are_answered() {
    let setup = common::Setup::openai("steer").await;
    let tg = FakeTelegram::start().await.unwrap();
    tg.add_chat(ChatSpec::private(42));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str(&format!(
        "[channels.telegram]\ntoken = \"{}\"\napi_url = \"{}\"\ndm_policy = \"open\"\n\
         webhook_url = \"http://{listen}/tg/hook\"\nwebhook_listen = \"{listen}\"\nwebhook_secret = \"s3cret\"\n",
        tg.token(),
        tg.api_url()
    ));
    std::fs::write(setup.config(), config).unwrap();
    let mut cmd = setup.chela(&["gateway"]);
    cmd.env("RUST_LOG", "info");
    let gateway = common::Chat::spawn(cmd);
    assert!(
        tg.wait_for_calls("setwebhook", 1, Duration::from_secs(20))
            .await
    );
    let set = tg
        .calls()
        .into_iter()
        .find(|c| c.method == "setwebhook")
        .unwrap();
    assert_eq!(set.body["secret_token"], "s3cret");
    let update = r#"{"update_id": 7, "message": {"message_id": 3, "date": 1700000000,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": "hello hook"}}"#;
    // The listener may need a moment after setWebhook; retry the connection, not the check.
    let mut status = 0;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(&listen).await.is_ok() {
            status = post(&listen, "/tg/hook", "wrong", update).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 401, "a wrong secret is refused");
    assert_eq!(post(&listen, "/tg/hook", "s3cret", update).await, 200);
    // Telegram retries: the same update again is acknowledged and not answered twice.
    assert_eq!(post(&listen, "/tg/hook", "s3cret", update).await, 200);
    // An update no decoder accepts (a lone surrogate) is acknowledged and skipped: refused,
    // Telegram would retry it and hold the updates behind it.
    let bad = r#"{"update_id": 8, "message": {"message_id": 4, "date": 1700000000,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": "bad \ud800"}}"#;
    assert_eq!(post(&listen, "/tg/hook", "s3cret", bad).await, 200);
    let answered = tg
        .wait_for(
            |t| t.sent(42).iter().any(|m| m.text == "ok: hello hook"),
            Duration::from_secs(20),
        )
        .await;
    // `/new` with text: one message, though it leaves a turn behind the command.
    let new = r#"{"update_id": 9, "message": {"message_id": 5, "date": 1700000001,
        "chat": {"id": 42, "type": "private", "first_name": "Ann"},
        "from": {"id": 42, "is_bot": false, "first_name": "Ann"}, "text": "/new again"}}"#;
    assert_eq!(post(&listen, "/tg/hook", "s3cret", new).await, 200);
    let again = tg
        .wait_for(
            |t| t.sent(42).iter().any(|m| m.text == "ok: again"),
            Duration::from_secs(20),
        )
        .await;
    assert!(again, "sent: {:?}", tg.sent(42));
    // The redelivered update is one message in the metrics too, and so is `/new again`.
    let line = gateway.wait_stderr_line("rpc listening on ").await;
    let rpc = line.split("rpc listening on ").nth(1).unwrap().trim();
    let metrics = reqwest::get(format!("http://{rpc}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    gateway.signal("TERM");
    let done = gateway.finish().await;
    assert!(answered, "sent: {:?}\nstderr: {}", tg.sent(42), done.stderr);
    assert!(
        metrics.contains("\nchela_inbound_messages_total{channel=\"telegram\"} 2\n"),
        "{metrics}"
    );
    let hello = tg
        .sent(42)
        .iter()
        .filter(|m| m.text == "ok: hello hook")
        .count();
    assert_eq!(hello, 1, "{:?}", tg.sent(42));
    // hello hook, again.
    assert_eq!(setup.model_calls().len(), 2);
}
