//! The fake Telegram's inbound side over real HTTP: getMe, simulated user messages,
//! getUpdates offsets, long polling, the one-poller rule, topics and replies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chela_testkit::telegram::{ChatSpec, Entity, FakeTelegram, SendOptions, UserSpec};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(10);

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

fn ann() -> UserSpec {
    UserSpec::new(42, "Ann").with_username("ann")
}

#[tokio::test]
async fn get_me_is_a_full_bot_user_and_pascal_case_works() {
    let tg = FakeTelegram::start().await.unwrap();
    for method in ["getMe", "GetMe", "getme"] {
        let (status, body) = call(&tg, method, json!({})).await;
        assert_eq!(status, 200);
        assert_eq!(body["ok"], true);
        let me = &body["result"];
        assert_eq!(me["id"], 123_456);
        assert_eq!(me["is_bot"], true);
        assert_eq!(me["first_name"], "chela");
        assert_eq!(me["username"], "chela_test_bot");
        for field in [
            "can_join_groups",
            "can_read_all_group_messages",
            "supports_inline_queries",
            "can_connect_to_business",
            "has_main_web_app",
        ] {
            assert!(me[field].is_boolean(), "{field} missing");
        }
    }
    assert_eq!(tg.call_count("GETME"), 3);
}

#[tokio::test]
async fn user_message_arrives_with_seconds_date_and_entities() {
    let tg = FakeTelegram::start().await.unwrap();
    let id = tg.user_sends(
        ChatSpec::private(42),
        ann(),
        "/start@chela_test_bot hi @chela_test_bot",
    );
    assert_eq!(id, 1);
    let (status, body) = call(&tg, "GetUpdates", json!({ "timeout": 0 })).await;
    assert_eq!(status, 200);
    let updates = body["result"].as_array().unwrap();
    assert_eq!(updates.len(), 1);
    let message = &updates[0]["message"];
    assert!(updates[0]["update_id"].as_i64().unwrap() > 0);
    assert_eq!(message["message_id"], 1);
    assert_eq!(message["text"], "/start@chela_test_bot hi @chela_test_bot");
    assert_eq!(
        message["chat"],
        json!({ "id": 42, "type": "private", "first_name": "Ann", "username": "ann" })
    );
    assert_eq!(
        message["from"],
        json!({ "id": 42, "is_bot": false, "first_name": "Ann", "username": "ann" })
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let date = message["date"].as_u64().unwrap();
    assert!(
        date <= now && date + 60 > now,
        "date {date} is not in seconds"
    );
    assert_eq!(
        message["entities"],
        json!([
            { "type": "bot_command", "offset": 0, "length": 21 },
            { "type": "mention", "offset": 25, "length": 15 },
        ])
    );
    // Message ids grow per chat.
    assert_eq!(tg.user_sends(ChatSpec::private(42), ann(), "again"), 2);
    assert_eq!(
        tg.user_sends(ChatSpec::private(7), UserSpec::new(7, "Bo"), "x"),
        1
    );
}

#[tokio::test]
async fn offset_confirms_everything_below_it() {
    let tg = FakeTelegram::start().await.unwrap();
    for text in ["one", "two", "three"] {
        tg.user_sends(ChatSpec::private(42), ann(), text);
    }
    let (_, body) = call(&tg, "getUpdates", json!({ "limit": 2 })).await;
    let batch = body["result"].as_array().unwrap().clone();
    assert_eq!(batch.len(), 2);
    let last = batch[1]["update_id"].as_i64().unwrap();
    // Without a new offset the same updates come again.
    let (_, again) = call(&tg, "getUpdates", json!({})).await;
    assert_eq!(again["result"].as_array().unwrap().len(), 3);
    let (_, rest) = call(&tg, "getUpdates", json!({ "offset": last + 1 })).await;
    let rest = rest["result"].as_array().unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["message"]["text"], "three");
    assert_eq!(tg.pending_updates().len(), 1);
    let (_, empty) = call(&tg, "getUpdates", json!({ "offset": last + 2 })).await;
    assert_eq!(empty["result"], json!([]));
    assert!(tg.pending_updates().is_empty());
}

#[tokio::test]
async fn long_poll_waits_and_wakes_on_a_new_message() {
    let tg = std::sync::Arc::new(FakeTelegram::start().await.unwrap());
    let poller = {
        let tg = std::sync::Arc::clone(&tg);
        tokio::spawn(async move { call(&tg, "getUpdates", json!({ "timeout": 30 })).await })
    };
    assert!(tg.wait_for(|t| t.pollers().in_flight == 1, BOUND).await);
    assert!(!poller.is_finished());
    tg.user_sends(ChatSpec::private(42), ann(), "wake up");
    let (status, body) = tokio::time::timeout(BOUND, poller).await.unwrap().unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["result"][0]["message"]["text"], "wake up");
    assert!(tg.wait_for(|t| t.pollers().in_flight == 0, BOUND).await);
}

#[tokio::test]
async fn long_poll_times_out_with_an_empty_list() {
    let tg = FakeTelegram::start().await.unwrap();
    let started = std::time::Instant::now();
    let (status, body) = call(&tg, "getUpdates", json!({ "timeout": 1 })).await;
    assert_eq!(status, 200);
    assert_eq!(body["result"], json!([]));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn a_second_concurrent_poller_gets_409() {
    let tg = std::sync::Arc::new(FakeTelegram::start().await.unwrap());
    let first = {
        let tg = std::sync::Arc::clone(&tg);
        tokio::spawn(async move { call(&tg, "getUpdates", json!({ "timeout": 30 })).await })
    };
    assert!(tg.wait_for(|t| t.pollers().in_flight == 1, BOUND).await);
    let (status, body) = call(&tg, "getUpdates", json!({ "timeout": 30 })).await;
    assert_eq!(status, 409);
    assert_eq!(
        body,
        json!({
            "ok": false,
            "error_code": 409,
            "description": "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
        })
    );
    let pollers = tg.pollers();
    assert_eq!(
        (pollers.in_flight, pollers.max_concurrent, pollers.conflicts),
        (1, 2, 1)
    );
    tg.user_sends(ChatSpec::private(42), ann(), "done");
    let (status, _) = tokio::time::timeout(BOUND, first).await.unwrap().unwrap();
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_poller_that_went_away_frees_the_slot() {
    let tg = FakeTelegram::start().await.unwrap();
    let url = format!("{}/bot{}/getUpdates", tg.api_url(), tg.token());
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gone = impatient
        .post(&url)
        .json(&json!({ "timeout": 30 }))
        .send()
        .await;
    assert!(gone.is_err());
    assert!(tg.wait_for(|t| t.pollers().in_flight == 0, BOUND).await);
    let (status, _) = call(&tg, "getUpdates", json!({ "timeout": 0 })).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn forum_topic_messages_and_replies_carry_full_context() {
    let tg = FakeTelegram::start().await.unwrap();
    let forum = ChatSpec::forum(-1_001_234_567_890, "Team");
    tg.add_chat(forum.clone());
    let topic = tg.add_topic(forum.id, "Builds").unwrap();
    let first = tg.user_sends_with(
        forum.clone(),
        ann(),
        "hello @chela_test_bot",
        SendOptions {
            message_thread_id: Some(topic),
            ..SendOptions::default()
        },
    );
    let second = tg.user_sends_with(
        forum.clone(),
        UserSpec::new(43, "Cy"),
        "me too",
        SendOptions {
            message_thread_id: Some(topic),
            reply_to_message_id: Some(first),
            entities: vec![Entity::text_mention(0, 2, ann())],
        },
    );
    let general = tg.user_sends(forum.clone(), ann(), "in general");
    let (_, body) = call(&tg, "getUpdates", json!({})).await;
    let updates = body["result"].as_array().unwrap();
    let m1 = &updates[0]["message"];
    assert_eq!(
        m1["chat"],
        json!({ "id": -1_001_234_567_890_i64, "type": "supergroup", "title": "Team", "is_forum": true })
    );
    assert_eq!(m1["message_thread_id"], topic);
    assert_eq!(m1["is_topic_message"], true);
    // Like Telegram: a topic message without an explicit reply replies to the topic's creation.
    assert_eq!(
        m1["reply_to_message"]["forum_topic_created"]["name"],
        "Builds"
    );
    assert_eq!(m1["reply_to_message"]["from"]["is_bot"], true);
    let m2 = &updates[1]["message"];
    assert_eq!(m2["message_id"], second);
    assert_eq!(m2["reply_to_message"]["message_id"], first);
    assert_eq!(m2["reply_to_message"]["text"], "hello @chela_test_bot");
    assert!(m2["reply_to_message"].get("reply_to_message").is_none());
    assert_eq!(m2["entities"][0]["type"], "text_mention");
    assert_eq!(m2["entities"][0]["user"]["id"], 42);
    let m3 = &updates[2]["message"];
    assert_eq!(m3["message_id"], general);
    assert!(m3.get("message_thread_id").is_none());
    assert!(m3.get("reply_to_message").is_none());
    // An unknown topic in a user message is created on the fly.
    tg.user_sends_with(
        forum.clone(),
        ann(),
        "x",
        SendOptions {
            message_thread_id: Some(500),
            ..SendOptions::default()
        },
    );
    assert!(
        tg.topics(forum.id)
            .iter()
            .any(|t| t.message_thread_id == 500)
    );
}

#[tokio::test]
async fn user_edits_and_allowed_updates() {
    let tg = FakeTelegram::start().await.unwrap();
    let id = tg.user_sends(ChatSpec::group(-4001, "Pals"), ann(), "typo");
    assert!(tg.user_edits(-4001, id, "fixed"));
    assert!(!tg.user_edits(-4001, 99, "nope"));
    let (_, body) = call(
        &tg,
        "getUpdates",
        json!({ "allowed_updates": ["edited_message"] }),
    )
    .await;
    let updates = body["result"].as_array().unwrap();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0]["edited_message"]["text"], "fixed");
    assert!(updates[0]["edited_message"]["edit_date"].is_i64());
    assert_eq!(updates[0]["edited_message"]["chat"]["type"], "group");
}

#[tokio::test]
async fn form_encoded_and_query_parameters_are_accepted() {
    let tg = FakeTelegram::start().await.unwrap();
    tg.user_sends(ChatSpec::private(42), ann(), "hi");
    let base = format!("{}/bot{}", tg.api_url(), tg.token());
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{base}/sendMessage"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("chat_id=42&text=a%20b+c&reply_parameters=%7B%22message_id%22%3A1%7D")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["text"], "a b c");
    assert_eq!(body["result"]["reply_to_message"]["message_id"], 1);
    let response = client
        .get(format!("{base}/getUpdates?offset=-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let multipart = client
        .post(format!("{base}/sendDocument"))
        .header("content-type", "multipart/form-data; boundary=x")
        .body("--x\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.txt\"\r\n\r\nhi\r\n--x--\r\n")
        .send()
        .await
        .unwrap();
    assert_eq!(multipart.status(), 400);
}
