//! The outbox worker in paused time: 429s wait their `retry_after`, other failures back off,
//! one chat's finals keep their order without holding another chat, and a reply past its TTL
//! (or refused for good) goes to the dead letters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use chela_channel::{BoxFuture, ChatKind, InboundSink, Limits};

use super::*;

/// A channel whose sends into each chat fail with the errors queued for that chat; sends
/// into chat `slow` wait while the gate is closed.
struct Scripted {
    start: Instant,
    gate: watch::Sender<bool>,
    refusals: Mutex<HashMap<String, VecDeque<ChannelError>>>,
    /// (ms since start, chat, text) of every send, refused ones included.
    sends: Mutex<Vec<(u128, String, String)>>,
}

impl Scripted {
    fn new() -> Arc<Scripted> {
        Arc::new(Scripted {
            start: Instant::now(),
            gate: watch::channel(true).0,
            refusals: Mutex::new(HashMap::new()),
            sends: Mutex::new(Vec::new()),
        })
    }

    fn refuse(&self, chat: &str, errors: impl IntoIterator<Item = ChannelError>) {
        let mut refusals = self.refusals.lock().unwrap();
        refusals.entry(chat.to_owned()).or_default().extend(errors);
    }

    fn sends(&self) -> Vec<(u128, String, String)> {
        self.sends.lock().unwrap().clone()
    }
}

impl Channel for Scripted {
    fn name(&self) -> &str {
        "test"
    }
    fn limits(&self) -> Limits {
        Limits {
            max_chars: 4000,
            max_lines: None,
            edit_interval_ms: 1000,
            group_edit_interval_ms: 1000,
            threads: false,
        }
    }
    fn run(
        &self,
        _sink: Arc<dyn InboundSink>,
        _shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async { Ok(()) })
    }
    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            if to.chat_id == "slow" {
                let _ = self.gate.subscribe().wait_for(|open| *open).await;
            }
            let at = (Instant::now() - self.start).as_millis();
            let mut sends = self.sends.lock().unwrap();
            sends.push((at, to.chat_id.clone(), text.to_owned()));
            let refusal = self
                .refusals
                .lock()
                .unwrap()
                .get_mut(&to.chat_id)
                .and_then(VecDeque::pop_front);
            match refusal {
                Some(e) => Err(e),
                None => Ok(SentMessage {
                    message_id: format!("m{}", sends.len()),
                }),
            }
        })
    }
    fn edit<'a>(
        &'a self,
        _to: &'a Conversation,
        _message: &'a SentMessage,
        _text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async { Ok(()) })
    }
}

fn chat(id: &str) -> Conversation {
    Conversation {
        channel: "test".into(),
        account: "default".into(),
        kind: ChatKind::Direct,
        chat_id: id.into(),
        thread_id: None,
    }
}

fn outbox(channel: &Arc<Scripted>, ttl: Duration) -> (Outbox, Store) {
    let store = Store::temporary().unwrap();
    let channels = HashMap::from([("test".to_owned(), channel.clone() as Arc<dyn Channel>)]);
    let files = crate::delivery::files::FilePolicy::new(std::env::temp_dir(), Vec::new());
    let outbox = Outbox::new(
        store.clone(),
        channels,
        ttl,
        CancellationToken::new(),
        files,
        None,
    );
    (outbox, store)
}

/// Records `text` for `to` in the store's outbox and hands it to the worker.
async fn submit(outbox: &Outbox, store: &Store, to: &str, text: &str) -> u64 {
    let created_ms = now_ms();
    let id = store
        .record_final("k", &chat(to), text, created_ms)
        .await
        .unwrap();
    outbox.submit(Delivery {
        session_key: "agent:main:main".to_owned(),
        id,
        to: chat(to),
        text: text.to_owned(),
        created_ms,
        run_id: None,
        stream: None,
        take_back: None,
    });
    id
}

fn transport() -> ChannelError {
    ChannelError::Transport("HTTP 502 Bad Gateway".into())
}

#[tokio::test(start_paused = true)]
async fn a_429_waits_its_retry_after_and_a_5xx_backs_off() {
    let channel = Scripted::new();
    channel.refuse(
        "a",
        [
            ChannelError::RateLimited {
                retry_after_ms: 2_500,
            },
            transport(),
            transport(),
        ],
    );
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    let id = submit(&outbox, &store, "a", "hello").await;
    outbox.idle().await;

    let at: Vec<u128> = channel.sends().iter().map(|(at, _, _)| *at).collect();
    assert_eq!(at.len(), 4, "{:?}", channel.sends());
    assert_eq!(at[0], 0);
    assert_eq!(at[1], 2_500, "the 429's retry_after, exactly");
    // Then 0.2 s and 0.4 s backoffs, each jittered into the upper half of its range.
    let first = at[2] - at[1];
    let second = at[3] - at[2];
    assert!((100..200).contains(&first), "first backoff {first} ms");
    assert!((200..400).contains(&second), "second backoff {second} ms");
    assert!(store.undelivered().unwrap().is_empty());
    assert_eq!(outbox.counters().delivered.load(Ordering::Relaxed), 1);
    assert_eq!(outbox.counters().retries.load(Ordering::Relaxed), 3);
    assert!(store.dead_letters().unwrap().is_empty());
    let _ = id;
}

#[tokio::test(start_paused = true)]
async fn a_429_between_two_5xx_starts_the_backoff_afresh() {
    let channel = Scripted::new();
    let limited = ChannelError::RateLimited {
        retry_after_ms: 1_000,
    };
    channel.refuse("a", [transport(), limited, transport()]);
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    submit(&outbox, &store, "a", "hello").await;
    outbox.idle().await;

    let at: Vec<u128> = channel.sends().iter().map(|(at, _, _)| *at).collect();
    assert_eq!(at.len(), 4, "{:?}", channel.sends());
    assert!((100..200).contains(&at[1]), "first backoff {} ms", at[1]);
    assert_eq!(at[2] - at[1], 1_000, "the 429's retry_after, exactly");
    // The API answered in between: the second 5xx waits the first backoff again, not twice it.
    let again = at[3] - at[2];
    assert!(
        (100..200).contains(&again),
        "backoff after the 429 {again} ms"
    );
    assert!(store.undelivered().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_chats_finals_keep_their_order_and_another_chat_is_not_held() {
    let channel = Scripted::new();
    // Chat a's first final meets a long 429 and then an error; chat slow's platform hangs.
    channel.refuse(
        "a",
        [
            ChannelError::RateLimited {
                retry_after_ms: 20_000,
            },
            transport(),
        ],
    );
    channel.gate.send_replace(false);
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    let mut ids = Vec::new();
    for (to, text) in [
        ("slow", "s1"),
        ("a", "a1"),
        ("a", "a2"),
        ("b", "b1"),
        ("b", "b2"),
    ] {
        let id = store
            .record_final("k", &chat(to), text, now_ms())
            .await
            .unwrap();
        ids.push((id, to, text));
    }
    for (id, to, text) in ids {
        outbox.submit(Delivery {
            session_key: "agent:main:main".to_owned(),
            id,
            to: chat(to),
            text: text.to_owned(),
            created_ms: now_ms(),
            run_id: None,
            stream: None,
            take_back: None,
        });
    }
    // Chat b is delivered while chat slow's send hangs.
    let texts = |who: &str| -> Vec<String> {
        channel
            .sends()
            .into_iter()
            .filter(|(_, to, _)| to == who)
            .map(|(_, _, text)| text)
            .collect()
    };
    for _ in 0..1_000 {
        if texts("b").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The paused clock runs ahead while the store writes on a blocking thread (b1's
        // delivered mark): give that thread real time too, or a busy machine ends the loop
        // before b2 could go (seen once in CI).
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(texts("b"), ["b1", "b2"]);
    assert!(texts("slow").is_empty());
    channel.gate.send_replace(true);
    outbox.idle().await;

    assert_eq!(texts("slow"), ["s1"]);
    // a1 was tried three times (429, error, success), then a2 once: never a2 before a1.
    assert_eq!(texts("a"), ["a1", "a1", "a1", "a2"]);
    let a: Vec<u128> = channel
        .sends()
        .into_iter()
        .filter(|(_, to, _)| to == "a")
        .map(|(at, _, _)| at)
        .collect();
    assert!(a[1] - a[0] >= 20_000, "the 429 was waited out: {a:?}");
    assert!(store.undelivered().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_reply_past_its_ttl_is_dead_lettered_and_counted() {
    let channel = Scripted::new();
    channel.refuse("a", std::iter::repeat_with(transport).take(1_000));
    let (outbox, store) = outbox(&channel, Duration::from_secs(60));
    let id = submit(&outbox, &store, "a", "never").await;
    // A record the previous process left long ago is dead-lettered without a try.
    let old = store
        .record_final("k", &chat("c"), "stale", now_ms() - 3_600_000)
        .await
        .unwrap();
    outbox.submit(Delivery::recorded(
        store.undelivered().unwrap().pop().unwrap(),
        None,
    ));
    outbox.idle().await;

    let dead: Vec<u64> = store.dead_letters().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(dead, [id, old]);
    assert!(store.undelivered().unwrap().is_empty());
    assert_eq!(outbox.counters().dead_lettered.load(Ordering::Relaxed), 2);
    assert!(channel.sends().iter().all(|(_, to, _)| to == "a"));
    // Retried until the TTL and not after: the last try is at most 60 s after the first.
    let last = channel.sends().last().unwrap().0;
    assert!((30_000..=60_000).contains(&last), "last try at {last} ms");
}

#[tokio::test(start_paused = true)]
async fn a_reply_refused_for_good_is_dead_lettered_at_once() {
    let channel = Scripted::new();
    channel.refuse(
        "a",
        [ChannelError::Rejected("Forbidden: bot was blocked".into())],
    );
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    let id = submit(&outbox, &store, "a", "hello").await;
    submit(&outbox, &store, "a", "next").await;
    outbox.idle().await;

    let dead: Vec<u64> = store.dead_letters().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(dead, [id]);
    let texts: Vec<String> = channel.sends().into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(texts, ["hello", "next"], "one try, then the next final");
}

#[tokio::test(start_paused = true)]
async fn settled_waits_for_every_final_queued_before_it() {
    let channel = Scripted::new();
    channel.refuse(
        "a",
        [ChannelError::RateLimited {
            retry_after_ms: 3_000,
        }],
    );
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    outbox.settled(&chat("a")).await;
    submit(&outbox, &store, "a", "first").await;
    submit(&outbox, &store, "a", "second").await;
    outbox.settled(&chat("a")).await;
    let texts: Vec<String> = channel.sends().into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(texts, ["first", "first", "second"]);
    assert!(Instant::now() - channel.start >= Duration::from_millis(3_000));
}

#[tokio::test(start_paused = true)]
async fn settled_waits_for_the_conversations_finals_only() {
    let channel = Scripted::new();
    channel.gate.send_replace(false);
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    submit(&outbox, &store, "slow", "s1").await;
    // Another conversation has nothing in flight.
    outbox.settled(&chat("b")).await;
    let waiting = outbox.clone();
    let settled = tokio::spawn(async move { waiting.settled(&chat("slow")).await });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!settled.is_finished());
    channel.gate.send_replace(true);
    settled.await.unwrap();
    let texts: Vec<String> = channel.sends().into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(texts, ["s1"]);
}

#[tokio::test(start_paused = true)]
async fn a_file_gone_by_send_time_is_dead_lettered_and_the_queue_goes_on() {
    let channel = Scripted::new();
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    let gone = std::env::temp_dir().join(format!("chela-gone-{}.png", uuid::Uuid::new_v4()));
    let text = format!("look\nMEDIA:{}", gone.display());
    let created_ms = now_ms();
    let id = store
        .record_final("k", &chat("a"), &text, created_ms)
        .await
        .unwrap();
    let outcome = outbox.submit_watched(Delivery {
        session_key: "agent:main:main".to_owned(),
        id,
        to: chat("a"),
        text,
        created_ms,
        run_id: None,
        stream: None,
        take_back: None,
    });
    submit(&outbox, &store, "a", "next").await;
    outbox.idle().await;

    let why = outcome.await.unwrap().unwrap_err();
    assert!(why.contains("does not exist"), "{why}");
    let dead: Vec<u64> = store.dead_letters().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(dead, [id]);
    let texts: Vec<String> = channel.sends().into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(
        texts,
        ["next"],
        "nothing of the dead one, and the next one goes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reply_handed_over_again_while_it_is_delivered_goes_once() {
    // A cluster node that took back a partition it lost for a moment recovers its
    // undelivered finals, among them one this outbox is still retrying.
    let channel = Scripted::new();
    channel.refuse("a", [transport()]);
    let (outbox, store) = outbox(&channel, Duration::from_secs(600));
    let id = submit(&outbox, &store, "a", "hello").await;
    let again = store.undelivered().unwrap();
    assert_eq!(again.len(), 1);
    outbox.submit(Delivery::recorded(again[0].clone(), None));
    outbox.idle().await;
    let sent: Vec<String> = channel.sends().into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(sent, ["hello", "hello"], "one refused, then one delivered");
    assert!(store.undelivered().unwrap().is_empty());
    assert_eq!(again[0].id, id);
}
