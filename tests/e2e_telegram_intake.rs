//! End-to-end, Telegram intake through `chela gateway` when an update cannot be decoded: the
//! batch is narrowed down, the bad update skipped, and every other message answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::telegram::{TgSetup, dm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_with_a_lone_surrogate_is_skipped_and_intake_goes_on() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let (chat, ann) = dm(42, "Ann");
    // All three wait in one batch: the whole batch cannot be decoded.
    s.tg.user_sends(chat.clone(), ann.clone(), "before");
    s.tg.user_sends_raw(chat.clone(), ann.clone(), r"bad \ud800 text");
    s.tg.user_sends(chat.clone(), ann.clone(), "after");
    let mut gw = s.gateway();
    gw.wait(&s, "both good messages answered", |s| {
        let texts = s.texts(42);
        texts.iter().any(|t| t == "ok: before") && texts.iter().any(|t| t == "ok: after")
    })
    .await;
    // A message sent later is answered too.
    s.tg.user_sends(chat, ann, "later");
    gw.wait(&s, "the later answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: later")
    })
    .await;
    s.wait_consumed(&mut gw).await;
    let done = gw.stop().await;
    assert_eq!(
        s.asked(),
        vec![
            "before".to_string(),
            "after".to_string(),
            "later".to_string()
        ]
    );
    assert!(
        done.stderr.contains("cannot be decoded; skipped"),
        "{}",
        done.stderr
    );
}
