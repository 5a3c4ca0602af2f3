//! End-to-end, Telegram through a storm of faults on the reply path (issue #10 item 7): 429s
//! with `retry_after`, JSON 500s, HTML 502s and dropped connections on sends, edits and
//! deletes, over 5 chats and 200 messages. Every reply arrives exactly once, in order per
//! chat, with no restart. (The drain time is reported by `benches/storm.rs`, not asserted.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use chela_testkit::telegram::Faults;
use common::telegram::{TgConfig, TgSetup, dm};

/// Chats of the storm.
const CHATS: i64 = 5;
/// Messages per chat.
const PER_CHAT: usize = 40;
/// Longest wait for every reply (the storm's 429s alone cost about 20 s per chat).
const STORM_WAIT: Duration = Duration::from_secs(240);

/// The storm of the acceptance suite: 30% 429s, 4% 500s, 3% 502s, 2% dropped connections.
pub fn storm(seed: u64) -> Faults {
    Faults {
        seed,
        too_many_requests: 0.30,
        retry_after_s: 1,
        internal_error: 0.04,
        bad_gateway_html: 0.03,
        dropped: 0.02,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_storm_over_five_chats_delivers_every_reply_once_and_in_order() {
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        queue: "cap = 100\n",
        telegram: "dm_policy = \"open\"",
        ..TgConfig::default()
    })
    .await;
    s.tg.inject_faults(storm(0x5EED));
    let users: Vec<i64> = (201..201 + CHATS).collect();
    let want = |id: i64| -> Vec<String> {
        (0..PER_CHAT)
            .map(|i| format!("ok: chat {id} message {i:02}"))
            .collect()
    };
    // All 200 are waiting before the gateway's first poll.
    for i in 0..PER_CHAT {
        for &id in &users {
            let (chat, user) = dm(id, &format!("U{id}"));
            s.tg.user_sends(chat, user, &format!("chat {id} message {i:02}"));
        }
    }
    let gw = s.gateway();
    let all = |s: &TgSetup| users.iter().all(|&id| s.texts(id).len() >= PER_CHAT);
    let done = s.tg.wait_for(|_| all(&s), STORM_WAIT).await;
    let faults = s.tg.fault_counts();
    let (ok, status) = s.cli(&["status"]).await;
    gw.stop().await;
    assert!(done, "not every reply arrived; faults {faults:?}; {status}");

    for &id in &users {
        let texts: Vec<String> = s
            .texts(id)
            .iter()
            .map(|t| t.trim_end().to_owned())
            .collect();
        assert_eq!(texts, want(id), "chat {id}");
    }
    // The storm did happen, with every kind of fault.
    assert!(faults.too_many_requests > 20, "{faults:?}");
    assert!(faults.internal_error > 0, "{faults:?}");
    assert!(faults.bad_gateway_html > 0, "{faults:?}");
    assert!(faults.dropped > 0, "{faults:?}");
    assert!(ok, "{status}");
    assert!(status.contains("undelivered replies: 0"), "{status}");
    assert!(status.contains("dead letters: 0"), "{status}");
}
