//! End-to-end, Discord under trouble through `chela gateway` against the fake Discord: a
//! gateway connection dropped mid-run (serenity RESUMEs), kill -9 and restart, injected and
//! enforced 429s, and a burst of mentions in followup mode.

use crate::common;

use chela_testkit::discord::UserSpec;
use common::discord::{DcConfig, DcSetup, text_channel};
use common::{count, messages, text_of};

/// The whole answer to `slow <ms> <n>`.
fn ticks(n: u32) -> String {
    (1..=n).map(|i| format!("tick {i} ")).collect()
}

fn ann() -> UserSpec {
    UserSpec::new(7001, "ann")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_drop_mid_run_resumes_and_the_reply_is_delivered_once() {
    const CHAN: u64 = 2_000_001;
    const OTHER: u64 = 2_000_002;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let trigger = s.mention(text_channel(CHAN), ann(), "slow 300 10");
    gw.wait(&s, "the first preview edit", |s| {
        s.sent(CHAN).first().is_some_and(|m| m.edits >= 1)
    })
    .await;
    assert_eq!(s.dc.drop_connection(), 1, "one gateway connection");
    // Sent around the drop: dispatched on the old connection or replayed on RESUME.
    let second = s.mention(text_channel(OTHER), ann(), "while reconnecting");
    let full = ticks(10);
    let want = full.trim_end().to_string();
    gw.wait(&s, "the resumed session and both answers", |s| {
        s.dc.resume_count() >= 1
            && s.dc.connected()
            && s.texts(CHAN).iter().any(|t| t.trim_end() == want)
            && !s.texts(OTHER).is_empty()
    })
    .await;
    gw.stop().await;

    assert_eq!(s.dc.identify_count(), 1, "resumed, not identified anew");
    assert_eq!(s.dc.resume_count(), 1);
    let sent = s.dc.sent(CHAN);
    assert_eq!(sent.len(), 1, "one bot message: {sent:#?}");
    assert_eq!(sent[0].content.trim_end(), want);
    assert_eq!(sent[0].reference, Some(trigger));
    let other = s.dc.sent(OTHER);
    assert_eq!(other.len(), 1, "answered once: {other:#?}");
    assert_eq!(other[0].reference, Some(second));
    assert_eq!(other[0].content.trim_end(), "ok: while reconnecting");
    let asked = s.asked();
    assert_eq!(asked.len(), 2, "no message run twice: {asked:#?}");
    assert_eq!(count(&asked.concat(), "slow 300 10"), 1, "{asked:#?}");
    assert_eq!(
        count(&asked.concat(), "while reconnecting"),
        1,
        "{asked:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_kill_9_is_answered_once_after_restart() {
    const CHAN: u64 = 2_000_010;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let trigger = s.mention(text_channel(CHAN), ann(), "slow 200 20");
    gw.wait(&s, "the first preview", |s| !s.texts(CHAN).is_empty())
        .await;
    // Once the preview was edited, its message is surely journaled (the reply notes a new
    // message before it goes on).
    let first = s.texts(CHAN);
    gw.wait(&s, "an edit of the preview", |s| s.texts(CHAN) != first)
        .await;
    gw.kill().await;
    let stale = s.texts(CHAN);
    assert_eq!(stale.len(), 1, "{stale:#?}");

    let full = ticks(20);
    let want = full.trim_end();
    let mut gw = s.gateway().await;
    gw.wait(&s, "the complete answer", |s| {
        s.texts(CHAN).iter().any(|t| t.trim_end() == want)
    })
    .await;
    gw.stop().await;

    // The killed process's partial preview was taken back (deleted) at the restart, and the
    // rerun sent the complete answer: one message in the channel, the answer once.
    let sent = s.sent(CHAN);
    let texts: Vec<String> = sent.iter().map(|m| m.content.clone()).collect();
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert_eq!(texts[0].trim_end(), want);
    let deleted: Vec<_> = s.dc.sent(CHAN).into_iter().filter(|m| m.deleted).collect();
    assert_eq!(deleted.len(), 1, "{deleted:#?}");
    assert!(
        full.starts_with(deleted[0].content.trim_end()),
        "{deleted:#?}"
    );
    assert_eq!(count(&texts.concat(), "tick 20"), 1, "{texts:#?}");
    assert!(
        sent.iter().all(|m| m.reference == Some(trigger)),
        "{sent:#?}"
    );
    // Run twice at most: once cut by the kill, once to the end.
    let asked = s.asked();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked.iter().all(|t| t.ends_with("slow 200 20")),
        "{asked:#?}"
    );
    s.assert_settled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_refused_with_429s_is_still_delivered_once() {
    const CHAN: u64 = 2_000_020;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    // Longer than the 1 s chela once waited for any 429: the wait must come from Discord's
    // `retry_after`.
    s.dc.inject_429(3, 1.4);
    s.mention(text_channel(CHAN), ann(), "hello through limits");
    gw.wait(&s, "the answer", |s| !s.texts(CHAN).is_empty())
        .await;
    gw.stop().await;

    assert_eq!(s.dc.rate_limited_count(), 3);
    assert_eq!(s.dc.early_retry_count(), 0, "retry_after not honoured");
    let sent = s.dc.sent(CHAN);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].content.trim_end(), "ok: hello through limits");
    assert_eq!(s.asked().len(), 1);
    s.assert_settled().await;
}

/// The first send of a guild reply is refused once: the retried send must still reference the
/// message it answers. `ReplyStream::show` takes `self.quote` before `send_reply` succeeds, so
/// the retry goes out without `message_reference`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_first_refused_with_a_429_still_quotes_the_mention() {
    const CHAN: u64 = 2_000_021;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    s.dc.inject_429(1, 0.5);
    let trigger = s.mention(text_channel(CHAN), ann(), "quote me");
    gw.wait(&s, "the answer", |s| !s.texts(CHAN).is_empty())
        .await;
    gw.stop().await;

    let sent = s.dc.sent(CHAN);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].reference, Some(trigger), "{sent:#?}");
}

/// A reply of about 17 parts under Discord's 5-per-5-s limit (enforced by the fake; with a
/// non-default `api_url` serenity's ratelimiter is off and chela paces itself): every part must
/// arrive, and no part may be tried again before the 429's `retry_after` has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_under_discords_rate_limit_is_delivered_whole() {
    const CHAN: u64 = 2_000_030;
    let s = DcSetup::open().await;
    s.dc.enforce_rate_limits(true);
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "long 12000");
    gw.wait(&s, "the last part", |s| {
        let texts = s.texts(CHAN);
        let chars: usize = texts.iter().map(|t| t.chars().count() + 2).sum();
        chars >= 12000 && texts.last().is_some_and(|t| t.trim_end().ends_with('.'))
    })
    .await;
    s.wait_settled().await;
    gw.stop().await;

    let key = format!("agent:main:discord:channel:{CHAN}");
    let answer = messages(&s.setup.export(&key).await)
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(text_of)
        .next_back()
        .expect("an assistant answer");
    let squash = |t: &str| t.split_whitespace().collect::<String>();
    let joined: String = s.texts(CHAN).iter().map(|t| squash(t)).collect();
    assert_eq!(joined, squash(&answer), "no text lost or repeated");
    assert_eq!(s.dc.early_retry_count(), 0, "retry_after not honoured");
    s.assert_settled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_mentions_in_followup_mode_is_answered_once_each_in_order() {
    const CHAN: u64 = 2_000_040;
    let s = DcSetup::with(DcConfig {
        mode: "followup",
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    let items: Vec<String> = (1..=5).map(|i| format!("burst item {i}")).collect();
    let triggers: Vec<u64> = items
        .iter()
        .map(|item| s.mention(text_channel(CHAN), ann(), item))
        .collect();
    gw.wait(&s, "five answers", |s| {
        let texts = s.texts(CHAN).concat();
        items.iter().all(|i| texts.contains(&format!("ok: {i}")))
    })
    .await;
    gw.stop().await;

    let sent = s.dc.sent(CHAN);
    let texts: Vec<String> = sent
        .iter()
        .map(|m| m.content.trim_end().to_string())
        .collect();
    assert_eq!(sent.len(), 5, "{texts:#?}");
    for item in &items {
        assert_eq!(count(&texts.concat(), item), 1, "{item} once: {texts:#?}");
    }
    let asked = s.asked();
    assert_eq!(asked.len(), 5, "{asked:#?}");
    // In the order sent: the model was asked in that order, and the replies (in id order)
    // answer the messages in that order.
    let want: Vec<String> = items.iter().map(|i| format!("ok: {i}")).collect();
    assert_eq!(texts, want, "replies out of order");
    let order: Vec<Option<u64>> = sent.iter().map(|m| m.reference).collect();
    let triggers: Vec<Option<u64>> = triggers.into_iter().map(Some).collect();
    assert_eq!(order, triggers, "replies out of order");
    for (asked, item) in asked.iter().zip(&items) {
        assert!(asked.ends_with(item.as_str()), "{asked:?} vs {item:?}");
    }
}

/// A bucket tighter than chela's own pacing (2 sends or edits per 3 s, where chela would go
/// once a second): the fake reports the bucket in `x-ratelimit-*` headers as Discord does, and
/// chela waits out each spent bucket, so every part arrives without a single 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_bucket_is_waited_out_before_discord_must_refuse() {
    const CHAN: u64 = 2_000_031;
    let s = DcSetup::open().await;
    s.dc.enforce_rate_limits(true);
    s.dc.set_rate_limit(2, std::time::Duration::from_secs(3));
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "long 5000");
    gw.wait(&s, "the last part", |s| {
        let texts = s.texts(CHAN);
        let chars: usize = texts.iter().map(|t| t.chars().count() + 2).sum();
        chars >= 5000 && texts.last().is_some_and(|t| t.trim_end().ends_with('.'))
    })
    .await;
    s.wait_settled().await;
    gw.stop().await;

    assert!(s.texts(CHAN).len() >= 3, "{:#?}", s.texts(CHAN));
    assert_eq!(
        s.dc.rate_limited_count(),
        0,
        "paced by the rate-limit headers"
    );
    s.assert_settled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_event_that_cannot_be_decoded_is_skipped_and_intake_goes_on() {
    // Issue #11.3 for Discord: serenity itself drops a frame it cannot decode (logging
    // "Err deserializing text") and reads the next one; nothing stalls.
    const CHAN: u64 = 2_000_031;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let options = chela_testkit::discord::MessageOptions {
        mentions_bot: true,
        ..Default::default()
    };
    s.dc.user_sends_raw(text_channel(CHAN), ann(), r"bad \ud800 text", options);
    s.mention(text_channel(CHAN), ann(), "after the bad one");
    gw.wait(&s, "the answer to the next message", |s| {
        s.texts(CHAN).iter().any(|t| t == "ok: after the bad one")
    })
    .await;
    let stderr = gw.stop().await;
    assert_eq!(s.asked(), vec!["after the bad one".to_string()]);
    assert!(stderr.contains("Err deserializing text"), "{stderr}");
}
