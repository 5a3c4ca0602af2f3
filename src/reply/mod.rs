//! Replies: run events -> chat. Preview edits, splitting, pacing, typing, finals.

pub mod media_lines;
pub mod reasoning;
pub mod split;
pub mod stream;

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, Conversation};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::domain::events::{Lifecycle, RunEvent, ToolEvent};
pub use stream::{
    FileFailure, FileOpener, FileProgress, NO_REPLY, ReplyStream, SentJournal, VoiceNote,
};

/// How often the typing indicator is refreshed (Telegram's expires after about 5 s).
const TYPING_EVERY: Duration = Duration::from_secs(6);

/// How long a run (or a turn waiting for one) goes before the typing indicator shows. A
/// reply that comes sooner needs none: Telegram recommends the indicator "only when a
/// response from the bot will take a noticeable amount of time to arrive", and each one is
/// an HTTP call (about a third of a fast reply's calls and CPU, benches/floor.rs).
const TYPING_AFTER: Duration = Duration::from_millis(500);

/// Most typing indicators in flight at once for turns waiting for a run slot. Thousands of
/// sessions may wait under the global run limit; each indicator sent at once would hold an
/// HTTP connection of its own (and the platform would refuse most of them with 429s).
const WAITING_TYPING_AT_ONCE: usize = 16;

/// The slots of [`WAITING_TYPING_AT_ONCE`], shared by every channel of the process.
static WAITING_TYPING: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(WAITING_TYPING_AT_ONCE);

/// Shows the typing indicator in `to` from [`TYPING_AFTER`] on until dropped (someone waits
/// for a run to start). A refresh finding every slot taken is skipped: the next one tries
/// again.
pub async fn keep_typing(
    channel: std::sync::Arc<dyn chela_channel::Channel>,
    to: chela_channel::Conversation,
) -> std::convert::Infallible {
    tokio::time::sleep(TYPING_AFTER).await;
    loop {
        if let Ok(_slot) = WAITING_TYPING.try_acquire() {
            let _ = channel.typing(&to).await;
        }
        tokio::time::sleep(TYPING_EVERY).await;
    }
}

/// How a run's events ended, as seen by the reply path.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The run ended normally or was stopped.
    End {
        /// True when stopped.
        aborted: bool,
    },
    /// The run failed with a short message.
    Error(String),
    /// The event stream closed without a lifecycle end.
    Closed,
}

/// What a run's events left for its final reply.
pub struct Streamed {
    /// The reply so far: its text and the previews shown.
    pub reply: ReplyStream,
    /// How the run ended.
    pub ending: Ending,
    /// What the run's `message` tool sent into this conversation ([`RunEvent::Sent`]).
    pub sent: Vec<String>,
}

impl Streamed {
    /// The final text: the streamed text with its ending, minus what was sent apart.
    pub fn final_text(&self) -> String {
        without_sent(&final_text(self.reply.text(), &self.ending), &self.sent)
    }
}

/// Consumes a run's events into a preview stream until the run ends. The caller then
/// records the final and calls [`ReplyStream::finish`]. `journal` is told of each new message;
/// `accepted_ms` is when the message answered was accepted (0: unknown). No preview goes out
/// before `earlier` is done (the conversation's earlier finals are delivered), so none shows
/// above the answer before it; the events are consumed meanwhile, so the run's end is not held
/// by those finals (its final queues behind them in the outbox).
pub async fn stream_events(
    channel: Arc<dyn Channel>,
    to: Conversation,
    quote: Option<String>,
    journal: Option<Arc<dyn SentJournal>>,
    events: mpsc::Receiver<RunEvent>,
    accepted_ms: u64,
    earlier: impl Future<Output = ()> + Send,
) -> Streamed {
    let reply = ReplyStream::quoting(channel.clone(), to.clone(), quote)
        .journaled(journal)
        .accepted_at(accepted_ms);
    stream_into(reply, channel, to, events, earlier).await
}

/// Consumes a run's events into `reply` (see [`stream_events`]).
async fn stream_into(
    mut reply: ReplyStream,
    channel: Arc<dyn Channel>,
    to: Conversation,
    mut events: mpsc::Receiver<RunEvent>,
    earlier: impl Future<Output = ()> + Send,
) -> Streamed {
    let mut sent = Vec::new();
    let mut thought = reasoning::ReasoningPreview::new(channel.clone(), to.clone());
    // Beside the events, never before them: an indicator the platform is slow to answer
    // (or one its client retries) holds neither the reply nor the turn.
    let typing = show_typing(channel, to);
    tokio::pin!(typing, earlier);
    let mut may_preview = false;
    let ending = loop {
        let due = reply.preview_due().filter(|_| may_preview);
        let thought_due = thought.due().filter(|_| may_preview);
        // Biased, the indicator first: once due, it goes out even when events are already
        // waiting.
        tokio::select! {
            biased;
            never = &mut typing => match never {},
            () = &mut earlier, if !may_preview => may_preview = true,
            event = events.recv() => match event {
                Some(RunEvent::Assistant { delta }) => {
                    // The reasoning shows whole above the answer before its first text.
                    if may_preview && thought.due().is_some() {
                        thought.flush().await;
                    }
                    reply.push(&delta);
                    let now = Instant::now();
                    if may_preview && reply.preview_due().is_some_and(|at| at <= now) {
                        reply.preview().await;
                    }
                }
                Some(RunEvent::Tool(ToolEvent::Start { .. })) => reply.mark_break(),
                Some(RunEvent::Sent { text }) => sent.push(text),
                Some(RunEvent::Reasoning { delta }) => {
                    thought.push(&delta);
                    if may_preview {
                        thought.show().await;
                    }
                }
                Some(RunEvent::Tool(_))
                | Some(RunEvent::Compaction(_))
                | Some(RunEvent::Finished(_))
                | Some(RunEvent::Lifecycle(Lifecycle::Start)) => {}
                Some(RunEvent::Lifecycle(Lifecycle::End { aborted, .. })) => break Ending::End { aborted },
                Some(RunEvent::Lifecycle(Lifecycle::Error { message })) => break Ending::Error(message),
                None => break Ending::Closed,
            },
            _ = sleep_until_opt(due), if due.is_some() => {
                // The reasoning shows above the answer's first preview, never below it.
                if thought.due().is_some() {
                    thought.flush().await;
                }
                reply.preview().await;
            }
            _ = sleep_until_opt(thought_due), if thought_due.is_some() => thought.show().await,
        }
    };
    Streamed {
        reply,
        ending,
        sent,
    }
}

/// Shows the typing indicator in `to` while a run goes (until dropped), from
/// [`TYPING_AFTER`] on, refreshed every [`TYPING_EVERY`]; a failed indicator is not retried
/// before the next refresh.
async fn show_typing(channel: Arc<dyn Channel>, to: Conversation) -> std::convert::Infallible {
    tokio::time::sleep(TYPING_AFTER).await;
    loop {
        let _ = channel.typing(&to).await;
        tokio::time::sleep(TYPING_EVERY).await;
    }
}

/// The text a finished reply should end with.
pub fn final_text(streamed: &str, ending: &Ending) -> String {
    match ending {
        Ending::End { aborted: false } | Ending::Closed => streamed.to_string(),
        Ending::End { aborted: true } if streamed.trim().is_empty() => String::new(),
        Ending::End { aborted: true } => format!("{streamed} [stopped]"),
        Ending::Error(message) if streamed.trim().is_empty() => format!("⚠️ {message}"),
        Ending::Error(message) => format!("{streamed}\n\n⚠️ {message}"),
    }
}

/// `text` without the messages in `sent` (sent by the `message` tool during the run); when
/// nothing else is left, `NO_REPLY` (send nothing, drop the preview).
pub fn without_sent(text: &str, sent: &[String]) -> String {
    let mut rest = text.to_owned();
    for s in sent.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if let Some(at) = rest.find(s) {
            rest.replace_range(at..at + s.len(), "");
        }
    }
    if rest.len() == text.len() {
        return text.to_owned();
    }
    let rest = rest.trim();
    if rest.is_empty() {
        stream::NO_REPLY.to_owned()
    } else {
        rest.to_owned()
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod without_sent_tests {
    use super::*;

    #[test]
    fn sent_messages_are_not_repeated_in_the_final() {
        let sent = vec!["Working on it.".to_owned()];
        assert_eq!(without_sent("Working on it.", &sent), stream::NO_REPLY);
        assert_eq!(
            without_sent("Working on it.\n\nDone: 3 files.", &sent),
            "Done: 3 files."
        );
        assert_eq!(without_sent("Something else", &sent), "Something else");
        assert_eq!(without_sent("Done", &[]), "Done");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod typing_tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use chela_channel::{BoxFuture, ChannelError, ChatKind, InboundSink, Limits, SentMessage};
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A channel whose typing indicators never get an answer, counting them.
    #[derive(Default)]
    struct SlowTyping {
        typing: AtomicUsize,
    }

    impl Channel for SlowTyping {
        fn name(&self) -> &str {
            "slow"
        }
        fn limits(&self) -> Limits {
            Limits {
                max_chars: 100,
                max_lines: None,
                edit_interval_ms: 0,
                group_edit_interval_ms: 0,
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
            _text: &'a str,
        ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
            Box::pin(async { Err(ChannelError::Unsupported("send")) })
        }
        fn edit<'a>(
            &'a self,
            _to: &'a Conversation,
            _message: &'a SentMessage,
            _text: &'a str,
        ) -> BoxFuture<'a, Result<(), ChannelError>> {
            Box::pin(async { Err(ChannelError::Unsupported("edit")) })
        }
        fn typing<'a>(&'a self, _to: &'a Conversation) -> BoxFuture<'a, Result<(), ChannelError>> {
            self.typing.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }

    fn slow_chat() -> Conversation {
        Conversation {
            channel: "slow".into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: "1".into(),
            thread_id: None,
        }
    }

    /// Streams `events` (then the run's end) into `channel`, previews held until `earlier`.
    fn streaming(
        channel: Arc<dyn Channel>,
        to: Conversation,
        earlier: impl Future<Output = ()> + Send + 'static,
    ) -> (
        mpsc::Sender<RunEvent>,
        tokio::task::JoinHandle<Result<Streamed, tokio::time::error::Elapsed>>,
    ) {
        let (tx, rx) = mpsc::channel(16);
        let stream = stream_events(channel, to, None, None, rx, 0, earlier);
        // Far longer than anything here takes on the paused clock, so a hang fails.
        let task = tokio::spawn(tokio::time::timeout(Duration::from_secs(600), stream));
        (tx, task)
    }

    /// The conversation's earlier finals, delivered when the sender is used.
    fn earlier_finals() -> (
        tokio::sync::oneshot::Sender<()>,
        impl Future<Output = ()> + Send + 'static,
    ) {
        let (delivered, earlier) = tokio::sync::oneshot::channel::<()>();
        let earlier = async move {
            let _ = earlier.await;
        };
        (delivered, earlier)
    }

    fn end() -> RunEvent {
        RunEvent::Lifecycle(Lifecycle::End {
            text: String::new(),
            aborted: false,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_typing_indicator_that_never_answers_does_not_hold_the_reply() {
        let channel = Arc::new(SlowTyping::default());
        // No previews (they would be refused and tried again at once, at an edit pace of 0).
        let (tx, task) = streaming(channel.clone(), slow_chat(), std::future::pending());
        tx.send(RunEvent::Assistant { delta: "ok".into() })
            .await
            .unwrap();
        tokio::time::sleep(TYPING_AFTER).await;
        tx.send(end()).await.unwrap();
        let streamed = task.await.unwrap().expect("the reply ends with its run");
        assert_eq!(streamed.ending, Ending::End { aborted: false });
        assert_eq!(streamed.final_text(), "ok");
        assert_eq!(channel.typing.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn previews_wait_for_the_earlier_finals_and_the_runs_end_does_not() {
        let text = "an answer long enough to be previewed at once";
        // The earlier finals never get out: no preview, and the reply still ends.
        let channel = crate::test_channel::TestChannel::new(1_000);
        let to = crate::test_channel::direct_chat();
        let (tx, task) = streaming(channel.clone(), to.clone(), std::future::pending());
        tx.send(RunEvent::Assistant { delta: text.into() })
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        tx.send(end()).await.unwrap();
        let streamed = task.await.unwrap().expect("the end waits for no final");
        assert_eq!(streamed.final_text(), text);
        assert!(channel.calls().is_empty(), "{:?}", channel.calls());

        // They get out while the run goes: the preview follows them.
        let channel = crate::test_channel::TestChannel::new(1_000);
        let (delivered, earlier) = earlier_finals();
        let (tx, task) = streaming(channel.clone(), to, earlier);
        tx.send(RunEvent::Assistant { delta: text.into() })
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(channel.calls().is_empty(), "{:?}", channel.calls());
        delivered.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(channel.calls(), [format!("send {text}")]);
        tx.send(end()).await.unwrap();
        task.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn reasoning_shows_before_the_answer_even_when_both_waited_for_earlier_finals() {
        let channel = crate::test_channel::TestChannel::new(1_000);
        let to = crate::test_channel::direct_chat();
        let (delivered, earlier) = earlier_finals();
        let (tx, task) = streaming(channel.clone(), to, earlier);
        let reasoning = RunEvent::Reasoning {
            delta: "thinking hard".into(),
        };
        tx.send(reasoning).await.unwrap();
        let answer = "an answer long enough to be previewed at once";
        tx.send(RunEvent::Assistant {
            delta: answer.into(),
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(channel.calls().is_empty(), "{:?}", channel.calls());
        delivered.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            channel.calls(),
            [
                "send 💭 Reasoning\n> thinking hard".to_owned(),
                format!("send {answer}")
            ]
        );
        tx.send(end()).await.unwrap();
        let streamed = task.await.unwrap().unwrap();
        assert_eq!(streamed.final_text(), answer, "the reasoning stays out");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_that_comes_at_once_shows_no_typing_and_a_slow_one_does() {
        let channel = Arc::new(SlowTyping::default());
        let (tx, task) = streaming(channel.clone(), slow_chat(), std::future::pending());
        tx.send(RunEvent::Assistant { delta: "ok".into() })
            .await
            .unwrap();
        tokio::time::sleep(TYPING_AFTER - Duration::from_millis(1)).await;
        tx.send(end()).await.unwrap();
        task.await.unwrap().expect("the reply ends with its run");
        assert_eq!(channel.typing.load(Ordering::SeqCst), 0, "a quick reply");

        let (tx, task) = streaming(channel.clone(), slow_chat(), std::future::pending());
        tokio::time::sleep(TYPING_AFTER + Duration::from_millis(1)).await;
        assert_eq!(channel.typing.load(Ordering::SeqCst), 1, "a slow one");
        tx.send(end()).await.unwrap();
        task.await.unwrap().expect("the reply ends with its run");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_turns_send_a_bounded_number_of_typing_indicators_at_once() {
        let channel = Arc::new(SlowTyping::default());
        let waiting: Vec<_> = (0..200)
            .map(|chat| {
                let to = Conversation {
                    channel: "slow".into(),
                    account: "default".into(),
                    kind: ChatKind::Direct,
                    chat_id: chat.to_string(),
                    thread_id: None,
                };
                tokio::spawn(keep_typing(channel.clone(), to))
            })
            .collect();
        // Nobody waited long enough yet (the slots are this test's alone: the other tests
        // never wait for a run).
        tokio::time::sleep(TYPING_AFTER - Duration::from_millis(1)).await;
        assert_eq!(
            channel.typing.load(Ordering::SeqCst),
            0,
            "a short wait shows none"
        );
        for _ in 0..3 {
            tokio::time::sleep(TYPING_EVERY).await;
        }
        let sent = channel.typing.load(Ordering::SeqCst);
        assert!(sent > 0, "some waiting turn shows typing");
        assert!(
            sent <= WAITING_TYPING_AT_ONCE,
            "{sent} indicators in flight at once"
        );
        for task in waiting {
            task.abort();
        }
    }
}
