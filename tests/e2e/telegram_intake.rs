//! End-to-end, Telegram intake through `chela gateway` when an update cannot be decoded: the
//! batch is narrowed down, the bad update skipped, and every other message answered.

use crate::common;

use common::telegram::{TgConfig, TgSetup, dm};

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
    let (ok, status) = s.cli(&["status"]).await;
    assert!(ok, "{status}");
    assert!(
        status.contains("undecodable updates skipped:\n  telegram:default: 1\n"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blank_messages_bad_model_names_and_long_arguments() {
    // Ann is an owner: switching models is for owners (`[commands] model`).
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: "[commands]\nowner_allow_from = [\"telegram:42\"]",
        ..TgConfig::default()
    })
    .await;
    let (chat, ann) = dm(42, "Ann");
    let mut gw = s.gateway();
    // Empty after trimming, or zero-width characters only: never a turn.
    s.tg.user_sends(chat.clone(), ann.clone(), "   \n ");
    s.tg.user_sends(chat.clone(), ann.clone(), "\u{200B}\u{FEFF} \u{2060}");
    s.tg.user_sends(chat.clone(), ann.clone(), "real");
    gw.wait(&s, "the real answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: real")
    })
    .await;
    // /model refuses a name with control characters.
    s.tg.user_sends(chat.clone(), ann.clone(), "/model gpt\u{7}\u{1b}[2Jx");
    gw.wait(&s, "the /model answer", |s| s.texts(42).len() >= 2)
        .await;
    // A command echoes only a short excerpt of what it was given.
    let long = format!("bogus{}", "z".repeat(3000));
    s.tg.user_sends(chat.clone(), ann.clone(), &format!("/queue {long}"));
    gw.wait(&s, "the /queue answer", |s| s.texts(42).len() >= 3)
        .await;
    s.tg.user_sends(chat, ann, "/model");
    gw.wait(&s, "the /model show answer", |s| s.texts(42).len() >= 4)
        .await;
    gw.stop().await;
    assert_eq!(
        s.asked(),
        vec!["real".to_string()],
        "blank messages reached the model"
    );
    let texts = s.texts(42);
    assert!(
        texts[1].contains("control characters") && !texts[1].contains('\u{1b}'),
        "{texts:#?}"
    );
    assert!(
        !texts[3].contains("this conversation's"),
        "the bad name was not set: {texts:#?}"
    );
    assert!(texts[2].contains("bogus"), "{texts:#?}");
    assert!(
        texts[2].chars().count() < 200,
        "the answer echoes at most an excerpt: {} chars",
        texts[2].chars().count()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_owner_may_not_switch_models_or_set_queue_numbers_past_the_bounds() {
    // Issue #32.8: a non-owner could `/model <anything>` and `/queue cap:100000` in a DM.
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: "[commands]\nowner_allow_from = [\"telegram:4300\"]",
        ..TgConfig::default()
    })
    .await;
    let (chat, ann) = dm(42, "Ann");
    let mut gw = s.gateway();
    let sends = [
        "/model very-expensive-model",
        "/queue collect cap:100000",
        "/queue collect debounce:3600s",
        "/status",
    ];
    for (i, text) in sends.into_iter().enumerate() {
        s.tg.user_sends(chat.clone(), ann.clone(), text);
        gw.wait(&s, text, |s| s.texts(42).len() > i).await;
    }
    gw.stop().await;
    let texts = s.texts(42);
    assert!(
        texts[0].starts_with("Switching models is for the bot's owners.")
            && texts[0].contains("[model] models"),
        "{texts:#?}"
    );
    assert_eq!(
        texts[1], "Bad cap: 100000 (a number from 1 to 100)",
        "{texts:#?}"
    );
    assert!(texts[2].starts_with("Bad debounce: 3600s"), "{texts:#?}");
    // Nothing changed: the configured model and queue.
    assert!(!texts[3].contains("this conversation's"), "{texts:#?}");
    assert!(!texts[3].contains("very-expensive-model"), "{texts:#?}");
    assert!(
        texts[3].contains("Queue: steer (debounce 200 ms, cap 20"),
        "{texts:#?}"
    );
    assert!(s.asked().is_empty(), "{:#?}", s.asked());
}
