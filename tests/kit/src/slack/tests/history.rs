//! `conversations.history` paged after `oldest`, as a client catching up reads it: newest
//! first, page after page back to `oldest` (not past it), each message once.

use serde_json::json;

use super::{Api, ann};
use crate::slack::{ChannelSpec, FakeSlack};

#[tokio::test]
async fn history_after_oldest_pages_back_to_it_newest_first() {
    let slack = FakeSlack::start().await.unwrap();
    let api = Api::new(&slack);
    let dm = ChannelSpec::im("U1");
    let oldest = slack.user_sends(&dm, &ann(), "already taken");
    let sent: Vec<String> = (1..=5)
        .map(|i| slack.user_sends(&dm, &ann(), &format!("missed {i}")))
        .collect();

    let mut read = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let page = api
            .ok(
                "conversations.history",
                json!({ "channel": "DU1", "oldest": oldest, "limit": 2, "cursor": cursor }),
            )
            .await;
        let messages = page["messages"].as_array().unwrap();
        assert!(messages.len() <= 2, "{page}");
        read.extend(
            messages
                .iter()
                .map(|m| m["ts"].as_str().unwrap().to_owned()),
        );
        if page["has_more"] != true {
            assert_eq!(page["response_metadata"]["next_cursor"], "");
            break;
        }
        cursor = page["response_metadata"]["next_cursor"]
            .as_str()
            .unwrap()
            .to_owned();
    }
    let newest_first: Vec<String> = sent.iter().rev().cloned().collect();
    assert_eq!(
        read, newest_first,
        "three pages, nothing at or before oldest"
    );
}
