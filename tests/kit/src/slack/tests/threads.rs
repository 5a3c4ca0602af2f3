//! Threads: replies by users and the bot, the parent's summary, broadcast replies in the
//! history, and `conversations.replies`.

use serde_json::json;

use super::{Api, ann, general};
use crate::slack::FakeSlack;

#[tokio::test]
async fn replies_come_parent_first_and_stay_out_of_the_history() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let parent = slack.user_sends(&general(), &ann(), "question");
    let first = slack.user_replies(&general(), &ann(), &parent, "more detail");
    let bot = api
        .ok(
            "chat.postMessage",
            json!({ "channel": "C1", "text": "answer", "thread_ts": first }),
        )
        .await;
    // A reply to a reply goes into the parent's thread.
    assert_eq!(bot["message"]["thread_ts"], parent.as_str());
    let bot_ts = bot["ts"].as_str().unwrap().to_owned();
    let broadcast = api
        .ok(
            "chat.postMessage",
            json!({ "channel": "C1", "text": "also here", "thread_ts": parent, "reply_broadcast": true }),
        )
        .await;

    let history = api
        .ok("conversations.history", json!({ "channel": "C1" }))
        .await;
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{history}");
    assert_eq!(messages[0]["ts"], broadcast["ts"]);
    assert_eq!(messages[0]["thread_ts"], parent.as_str());
    let head = &messages[1];
    assert_eq!(head["ts"], parent.as_str());
    assert_eq!(head["thread_ts"], parent.as_str());
    assert_eq!(head["reply_count"], 3);
    assert_eq!(head["latest_reply"], broadcast["ts"]);

    let thread = api
        .ok(
            "conversations.replies",
            json!({ "channel": "C1", "ts": parent }),
        )
        .await;
    let ts: Vec<&str> = thread["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["ts"].as_str().unwrap())
        .collect();
    let broadcast_ts = broadcast["ts"].as_str().unwrap();
    assert_eq!(
        ts,
        [
            parent.as_str(),
            first.as_str(),
            bot_ts.as_str(),
            broadcast_ts
        ]
    );
    assert_eq!(thread["has_more"], false);

    let newer = api
        .ok(
            "conversations.replies",
            json!({ "channel": "C1", "ts": parent, "oldest": first }),
        )
        .await;
    let ts: Vec<&str> = newer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["ts"].as_str().unwrap())
        .collect();
    assert_eq!(ts, [parent.as_str(), bot_ts.as_str(), broadcast_ts]);

    let paged = api
        .ok(
            "conversations.replies",
            json!({ "channel": "C1", "ts": parent, "limit": 2 }),
        )
        .await;
    assert_eq!(paged["messages"].as_array().unwrap().len(), 3);
    assert_eq!(paged["has_more"], true);
    let cursor = paged["response_metadata"]["next_cursor"].clone();
    let rest = api
        .ok(
            "conversations.replies",
            json!({ "channel": "C1", "ts": parent, "limit": 2, "cursor": cursor }),
        )
        .await;
    assert_eq!(rest["messages"][0]["ts"], parent.as_str());
    assert_eq!(rest["messages"][1]["ts"], broadcast_ts);

    let unknown = json!({ "channel": "C1", "ts": "1.000001" });
    assert_eq!(
        api.error("conversations.replies", unknown).await,
        "thread_not_found"
    );
    let sent = slack.sent("C1");
    assert_eq!(sent[0].thread_ts.as_deref(), Some(parent.as_str()));
    assert!(sent[1].reply_broadcast);
}
