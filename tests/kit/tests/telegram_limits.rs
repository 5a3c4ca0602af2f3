//! The fake Telegram's 429s over real HTTP: injected failures and enforced rate limits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chela_testkit::telegram::{ChatSpec, FakeTelegram, Rate, RateLimits, UserSpec};
use serde_json::{Value, json};

async fn call(tg: &FakeTelegram, method: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/bot{}/{method}", tg.api_url(), tg.token());
    let response = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn too_many(body: &Value, seconds: u64) {
    assert_eq!(
        body,
        &json!({
            "ok": false,
            "error_code": 429,
            "description": format!("Too Many Requests: retry after {seconds}"),
            "parameters": { "retry_after": seconds },
        })
    );
}

#[tokio::test]
async fn injected_429s_fail_the_next_sends_and_edits() {
    let tg = FakeTelegram::start().await.unwrap();
    tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), "hi");
    tg.inject_429(2, 7);
    let (status, first) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "a" })).await;
    assert_eq!(status, 429);
    too_many(&first, 7);
    // Invalid calls do not use up an injected failure.
    let (status, _) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "" })).await;
    assert_eq!(status, 400);
    let (_, second) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": 1, "text": "x" }),
    )
    .await;
    assert_eq!(
        second["error_code"], 400,
        "a user message can't be edited: validation first"
    );
    let (status, second) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "b" })).await;
    assert_eq!(status, 429);
    too_many(&second, 7);
    let (status, ok) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "c" })).await;
    assert_eq!(status, 200);
    assert_eq!(ok["result"]["text"], "c");
    assert_eq!(tg.sent(42).len(), 1);
    assert_eq!(tg.call_count("sendMessage"), 4);
}

#[tokio::test]
async fn rate_limits_are_off_by_default_and_enforced_when_on() {
    let tg = FakeTelegram::start().await.unwrap();
    tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), "hi");
    for text in ["a", "b", "c"] {
        let (status, _) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": text })).await;
        assert_eq!(status, 200);
    }
    tg.enforce_rate_limits(true);
    let (status, sent) = call(&tg, "sendMessage", json!({ "chat_id": 42, "text": "d" })).await;
    assert_eq!(status, 200);
    let (status, limited) = call(
        &tg,
        "editMessageText",
        json!({ "chat_id": 42, "message_id": sent["result"]["message_id"], "text": "e" }),
    )
    .await;
    assert_eq!(status, 429);
    too_many(&limited, 1);
    // Another private chat has its own budget.
    tg.add_chat(ChatSpec::private(43));
    let (status, _) = call(&tg, "sendMessage", json!({ "chat_id": 43, "text": "x" })).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn group_limits_are_configurable() {
    let tg = FakeTelegram::start().await.unwrap();
    tg.add_chat(ChatSpec::group(-4001, "Pals"));
    tg.set_rate_limits(RateLimits {
        group_chat: Rate::per_minute(2),
        ..RateLimits::default()
    });
    tg.enforce_rate_limits(true);
    for text in ["a", "b"] {
        let (status, _) = call(
            &tg,
            "sendMessage",
            json!({ "chat_id": -4001, "text": text }),
        )
        .await;
        assert_eq!(status, 200);
    }
    let (status, limited) =
        call(&tg, "sendMessage", json!({ "chat_id": -4001, "text": "c" })).await;
    assert_eq!(status, 429);
    let retry = limited["parameters"]["retry_after"].as_u64().unwrap();
    assert!((55..=60).contains(&retry), "retry_after {retry}");
    assert_eq!(
        limited["description"],
        format!("Too Many Requests: retry after {retry}")
    );
}
