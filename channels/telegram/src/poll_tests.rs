//! The poll loop against the fake Telegram: a batch is accepted for the cursor save to make
//! durable, and a failed save is tried again before the next poll confirms the batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chela_channel::{BoxFuture, Inbound, InboundSink, SinkError};
use chela_testkit::FakeTelegram;
use chela_testkit::telegram::{ChatSpec, UserSpec};
use teloxide::Bot;
use tokio_util::sync::CancellationToken;

/// Records how messages came in and which cursors were saved; the first save fails.
struct Sink {
    tg: Arc<FakeTelegram>,
    /// `accept_before_cursor` texts, in order.
    before_cursor: Mutex<Vec<String>>,
    /// Texts given to plain `accept`.
    plain: Mutex<Vec<String>>,
    /// Every save asked for: the offset, whether it was refused, and how many polls the
    /// fake had seen by then.
    saves: Mutex<Vec<(i64, bool, usize)>>,
}

impl InboundSink for Sink {
    fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        self.plain.lock().unwrap().push(inbound.text);
        Box::pin(async { Ok(()) })
    }

    fn accept_before_cursor(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
        self.before_cursor.lock().unwrap().push(inbound.text);
        Box::pin(async { Ok(()) })
    }

    fn save_cursor<'a>(
        &'a self,
        _name: &'a str,
        value: i64,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        let mut saves = self.saves.lock().unwrap();
        let refused = saves.is_empty();
        saves.push((value, refused, self.tg.call_count("getUpdates")));
        Box::pin(async move {
            match refused {
                true => Err(SinkError("the store failed".into())),
                false => Ok(()),
            }
        })
    }
}

#[tokio::test]
async fn a_batch_waits_for_its_cursor_save_which_is_tried_again_when_it_fails() {
    let tg = Arc::new(FakeTelegram::start().await.unwrap());
    let url = reqwest::Url::parse(&tg.api_url()).unwrap();
    let bot = Bot::new(tg.token()).set_api_url(url);
    let shutdown = CancellationToken::new();
    let me = super::who_am_i(&bot, &shutdown).await.unwrap();
    let (chat, user) = (ChatSpec::private(7), UserSpec::new(7, "Ann"));
    tg.user_sends(chat.clone(), user.clone(), "one");
    tg.user_sends(chat, user, "two");

    let sink = Arc::new(Sink {
        tg: tg.clone(),
        before_cursor: Mutex::default(),
        plain: Mutex::default(),
        saves: Mutex::default(),
    });
    let polling = {
        let (sink, shutdown, bot) = (sink.clone(), shutdown.clone(), bot.clone());
        tokio::spawn(async move {
            let connected = AtomicBool::new(false);
            super::poll(&bot, &me, "default", 0, sink, shutdown, &connected).await
        })
    };
    // The poll after a successful save is a change of the fake's state: the wait looks again.
    let saved = |_: &FakeTelegram| sink.saves.lock().unwrap().iter().any(|save| !save.1);
    assert!(tg.wait_for(saved, Duration::from_secs(20)).await);
    shutdown.cancel();
    polling.await.unwrap().unwrap();

    // The first save failed and was tried again; nothing was taken twice.
    let saves = sink.saves.lock().unwrap().clone();
    assert_eq!(saves.len(), 2, "{saves:?}");
    assert!(saves[0].1 && !saves[1].1, "{saves:?}");
    assert_eq!(saves[0].0, saves[1].0, "{saves:?}");
    let texts = sink.before_cursor.lock().unwrap().clone();
    assert_eq!(texts, ["one", "two"]);
    // No poll (which would have confirmed the batch) came between the two saves.
    assert_eq!(saves[0].2, saves[1].2, "{saves:?}");
    assert!(sink.plain.lock().unwrap().is_empty());
}
