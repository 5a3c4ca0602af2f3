//! ReplyStream under 429s, in paused time: nothing goes out before the wait the platform asked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;

use chela_channel::{BoxFuture, ChatKind, InboundSink};
use tokio_util::sync::CancellationToken;

use super::*;

/// A channel that refuses its first `refusals` sends/edits with 429 and records when each
/// call came.
struct Limited {
    retry_after_ms: u64,
    refusals: Mutex<u32>,
    calls: Mutex<Vec<(Instant, String)>>,
    start: Instant,
}

impl Limited {
    fn new(refusals: u32, retry_after_ms: u64) -> Arc<Limited> {
        Arc::new(Limited {
            retry_after_ms,
            refusals: Mutex::new(refusals),
            calls: Mutex::new(Vec::new()),
            start: Instant::now(),
        })
    }

    fn call(&self, what: String) -> Result<(), ChannelError> {
        self.calls.lock().unwrap().push((Instant::now(), what));
        let mut refusals = self.refusals.lock().unwrap();
        if *refusals > 0 {
            *refusals -= 1;
            return Err(ChannelError::RateLimited {
                retry_after_ms: self.retry_after_ms,
            });
        }
        Ok(())
    }

    /// Each call's time since the start, in ms, and what it was.
    fn log(&self) -> Vec<(u128, String)> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .map(|(at, what)| ((*at - self.start).as_millis(), what.clone()))
            .collect()
    }
}

impl Channel for Limited {
    fn name(&self) -> &str {
        "limited"
    }
    fn limits(&self) -> Limits {
        Limits {
            max_chars: 100,
            max_lines: None,
            edit_interval_ms: 1_000,
            group_edit_interval_ms: 1_000,
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
        _to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            self.call(format!("send {text}"))?;
            Ok(SentMessage {
                message_id: "1".into(),
            })
        })
    }
    fn edit<'a>(
        &'a self,
        _to: &'a Conversation,
        _message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.call(format!("edit {text}")) })
    }
}

fn dm() -> Conversation {
    Conversation {
        channel: "limited".into(),
        account: "default".into(),
        kind: ChatKind::Direct,
        chat_id: "1".into(),
        thread_id: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_final_after_a_refused_preview_waits_the_retry_after() {
    let channel = Limited::new(1, 2_500);
    let mut reply = ReplyStream::new(channel.clone(), dm());
    reply.push("Hello");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    // The run ends at once: the final must still wait out the 429.
    reply.finish("Hello there").await.unwrap();
    assert_eq!(
        channel.log(),
        vec![
            (1_000, "send Hello".to_owned()),
            (3_500, "send Hello there".to_owned())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_final_is_retried_after_the_wait_each_time() {
    let channel = Limited::new(2, 700);
    let mut reply = ReplyStream::new(channel.clone(), dm());
    reply.finish("Done").await.unwrap();
    assert_eq!(
        channel.log(),
        vec![
            (0, "send Done".to_owned()),
            (700, "send Done".to_owned()),
            (1_400, "send Done".to_owned())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn previews_pause_for_the_retry_after_instead_of_the_edit_interval() {
    let channel = Limited::new(1, 4_000);
    let mut reply = ReplyStream::new(channel.clone(), dm());
    reply.push("one");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    assert_eq!(
        reply.preview_due(),
        Some(channel.start + Duration::from_millis(5_000))
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    assert_eq!(channel.log().len(), 1, "no preview inside the wait");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    reply.preview().await;
    assert_eq!(channel.log()[1], (5_000, "send one".to_owned()));
}
