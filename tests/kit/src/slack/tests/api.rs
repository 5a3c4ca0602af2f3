//! The Web API: tokens, errors, posting and history, edits and deletes, reactions, pins and
//! 429s.

use reqwest::StatusCode;
use serde_json::json;

use super::{Api, ann, general};
use crate::slack::FakeSlack;

#[tokio::test]
async fn tokens_are_checked_and_unknown_methods_are_404() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let (status, _, answer) = api.raw("auth.test", None, &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer, json!({ "ok": false, "error": "not_authed" }));
    let (_, _, answer) = api.raw("auth.test", Some("xoxb-nope"), &json!({})).await;
    assert_eq!(answer["error"], "invalid_auth");
    let app = Some(FakeSlack::APP_TOKEN);
    let (_, _, answer) = api.raw("chat.postMessage", app, &json!({})).await;
    assert_eq!(answer["error"], "not_allowed_token_type");
    let bot = Some(FakeSlack::BOT_TOKEN);
    let (_, _, answer) = api.raw("apps.connections.open", bot, &json!({})).await;
    assert_eq!(answer["error"], "not_allowed_token_type");
    let (status, _, answer) = api.raw("chat.nothing", bot, &json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(answer["error"], "unknown_method");

    let me = api.ok("auth.test", json!({})).await;
    assert_eq!(me["user_id"], "UBOT");
    assert_eq!(me["bot_id"], "BBOT");
    assert_eq!(me["team_id"], "T1");
    let (_, _, answer) = api.raw("apps.connections.open", app, &json!({})).await;
    let url = answer["url"].as_str().unwrap();
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    assert!(url.contains("/socket?ticket=1"), "{url}");
    assert_eq!(slack.tickets_issued(), 1);
    assert_eq!(slack.call_count("auth.test"), 3);
}

#[tokio::test]
async fn post_message_answers_and_history_pages_newest_first() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let first = slack.user_sends(&general(), &ann(), "hi <@UBOT>");
    let mut posted = Vec::new();
    for i in 0..4 {
        let answer = api
            .ok(
                "chat.postMessage",
                json!({ "channel": "C1", "text": format!("reply {i}") }),
            )
            .await;
        assert_eq!(answer["channel"], "C1");
        assert_eq!(answer["message"]["user"], "UBOT");
        assert_eq!(answer["message"]["bot_id"], "BBOT");
        assert_eq!(answer["message"]["ts"], answer["ts"]);
        posted.push(answer["ts"].as_str().unwrap().to_owned());
    }
    let mut all = vec![first.clone()];
    all.extend(posted.iter().cloned());
    for pair in all.windows(2) {
        assert!(pair[0] < pair[1], "{pair:?}");
        let (a, b): (f64, f64) = (pair[0].parse().unwrap(), pair[1].parse().unwrap());
        assert!(a < b, "{pair:?}");
        let (secs, micros) = pair[1].split_once('.').unwrap();
        assert_eq!((secs.len(), micros.len()), (10, 6));
    }

    let page = api
        .ok(
            "conversations.history",
            json!({ "channel": "C1", "limit": 2 }),
        )
        .await;
    let ts: Vec<&str> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["ts"].as_str().unwrap())
        .collect();
    assert_eq!(ts, [posted[3].as_str(), posted[2].as_str()]);
    assert_eq!(page["has_more"], true);
    let cursor = page["response_metadata"]["next_cursor"].as_str().unwrap();
    assert!(!cursor.is_empty());
    let query = format!("channel=C1&limit=2&cursor={cursor}");
    let page = api.get("conversations.history", &query).await;
    assert_eq!(page["messages"][0]["ts"], posted[1].as_str());
    assert_eq!(page["messages"][1]["ts"], posted[0].as_str());
    let cursor = page["response_metadata"]["next_cursor"].as_str().unwrap();
    let query = format!("channel=C1&limit=2&cursor={cursor}");
    let page = api.get("conversations.history", &query).await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["messages"][0]["ts"], first.as_str());
    assert_eq!(page["messages"][0]["user"], "U1");
    assert_eq!(page["messages"][0]["text"], "hi <@UBOT>");
    assert!(page["messages"][0].get("bot_id").is_none());
    assert_eq!(page["has_more"], false);
    assert_eq!(page["response_metadata"]["next_cursor"], "");

    let after = api
        .form(
            "conversations.history",
            &[("channel", "C1"), ("oldest", &posted[1])],
        )
        .await;
    assert_eq!(after["messages"].as_array().unwrap().len(), 2);
    let inclusive = api
        .form(
            "conversations.history",
            &[
                ("channel", "C1"),
                ("oldest", &posted[1]),
                ("inclusive", "true"),
            ],
        )
        .await;
    assert_eq!(inclusive["messages"].as_array().unwrap().len(), 3);
    let before = api
        .ok(
            "conversations.history",
            json!({ "channel": "C1", "latest": posted[0] }),
        )
        .await;
    assert_eq!(before["messages"].as_array().unwrap().len(), 1);
    assert_eq!(slack.sent("C1").len(), 4);
    assert_eq!(slack.messages("C1").len(), 5);
}

#[tokio::test]
async fn post_message_errors_and_form_bodies() {
    let slack = FakeSlack::start().await.unwrap();
    slack.add_channel(&general());
    let api = Api::new(&slack);
    let post = |body| api.error("chat.postMessage", body);
    assert_eq!(
        post(json!({ "channel": "C9", "text": "x" })).await,
        "channel_not_found"
    );
    assert_eq!(
        post(json!({ "channel": "C1", "text": "" })).await,
        "no_text"
    );
    let long = "a".repeat(FakeSlack::MAX_TEXT + 1);
    assert_eq!(
        post(json!({ "channel": "C1", "text": long })).await,
        "msg_too_long"
    );
    let orphan = json!({ "channel": "C1", "text": "x", "thread_ts": "1.000100" });
    assert_eq!(post(orphan).await, "thread_not_found");
    assert!(slack.sent("C1").is_empty());

    let blocks = r#"[{"type":"section","text":{"type":"mrkdwn","text":"*hi*"}}]"#;
    let answer = api
        .form(
            "chat.postMessage",
            &[("channel", "C1"), ("blocks", blocks), ("mrkdwn", "true")],
        )
        .await;
    assert_eq!(answer["ok"], true, "{answer}");
    let answer = api
        .get("chat.postMessage", "channel=C1&text=via+get%21")
        .await;
    assert_eq!(answer["ok"], true, "{answer}");
    let sent = slack.sent("C1");
    assert_eq!(sent[0].blocks.as_ref().unwrap()[0]["text"]["text"], "*hi*");
    assert_eq!(sent[1].text, "via get!");
    assert_eq!(slack.calls()[0].method, "chat.postMessage");
}

#[tokio::test]
async fn update_and_delete_only_the_bots_messages() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let theirs = slack.user_sends(&general(), &ann(), "hello");
    let ours = api
        .ok(
            "chat.postMessage",
            json!({ "channel": "C1", "text": "draft" }),
        )
        .await;
    let ts = ours["ts"].as_str().unwrap();
    for text in ["draft more", "final"] {
        let answer = api
            .ok(
                "chat.update",
                json!({ "channel": "C1", "ts": ts, "text": text }),
            )
            .await;
        assert_eq!(
            (answer["ts"].as_str(), answer["text"].as_str()),
            (Some(ts), Some(text))
        );
    }
    let sent = slack.last_sent("C1").unwrap();
    assert_eq!((sent.text.as_str(), sent.edits), ("final", 2));
    assert_eq!(sent.edit_history, ["draft more", "final"]);
    let update = |ts: &str| json!({ "channel": "C1", "ts": ts, "text": "x" });
    assert_eq!(
        api.error("chat.update", update(&theirs)).await,
        "cant_update_message"
    );
    assert_eq!(
        api.error("chat.update", update("1.000001")).await,
        "message_not_found"
    );
    let delete = |ts: &str| json!({ "channel": "C1", "ts": ts });
    assert_eq!(
        api.error("chat.delete", delete(&theirs)).await,
        "cant_delete_message"
    );
    api.ok("chat.delete", delete(ts)).await;
    assert_eq!(
        api.error("chat.delete", delete(ts)).await,
        "message_not_found"
    );
    assert!(slack.sent("C1").is_empty());
    assert_eq!(slack.deleted("C1")[0].text, "final");
}

#[tokio::test]
async fn reactions_and_pins() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let ts = slack.user_sends(&general(), &ann(), "look");
    let react = |name: &str| json!({ "channel": "C1", "timestamp": ts, "name": name });
    api.ok("reactions.add", react("eyes")).await;
    assert_eq!(
        api.error("reactions.add", react("eyes")).await,
        "already_reacted"
    );
    for bad in [":eyes:", "Eyes", "two words"] {
        assert_eq!(api.error("reactions.add", react(bad)).await, "invalid_name");
    }
    let unknown = json!({ "channel": "C1", "timestamp": "1.000001", "name": "eyes" });
    assert_eq!(
        api.error("reactions.add", unknown).await,
        "message_not_found"
    );
    api.ok("reactions.add", react("white_check_mark")).await;
    api.ok("reactions.remove", react("eyes")).await;
    assert_eq!(slack.reactions("C1", &ts), ["white_check_mark"]);

    let pin = json!({ "channel": "C1", "timestamp": ts });
    api.ok("pins.add", pin.clone()).await;
    assert_eq!(api.error("pins.add", pin).await, "already_pinned");
    let unknown = json!({ "channel": "C1", "timestamp": "1.000001" });
    assert_eq!(api.error("pins.add", unknown).await, "message_not_found");
    assert_eq!(slack.pinned("C1"), [ts]);
}

#[tokio::test]
async fn injected_429s_carry_retry_after_and_do_nothing() {
    let slack = FakeSlack::start().await.unwrap();
    slack.add_channel(&general());
    slack.inject_429("chat.postMessage", 2, 7);
    let api = Api::new(&slack);
    let body = json!({ "channel": "C1", "text": "x" });
    for _ in 0..2 {
        let (status, headers, answer) = api
            .raw("chat.postMessage", Some(FakeSlack::BOT_TOKEN), &body)
            .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers["retry-after"], "7");
        assert_eq!(answer, json!({ "ok": false, "error": "ratelimited" }));
    }
    assert!(slack.sent("C1").is_empty());
    api.ok("auth.test", json!({})).await;
    api.ok("chat.postMessage", body).await;
    assert_eq!(slack.sent("C1").len(), 1);
    assert_eq!(slack.rate_limited_count(), 2);
    assert_eq!(slack.call_count("chat.postMessage"), 3);
}
