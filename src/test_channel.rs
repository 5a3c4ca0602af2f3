//! A scripted channel for unit tests: records every send, edit and delete with the time it
//! came, and refuses sends and edits with the errors it is given, in order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits, SentMessage,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A channel named `test` that records what it is asked to do.
pub struct TestChannel {
    limits: Limits,
    /// Private command answers are not supported (like the terminal).
    no_command_answers: bool,
    /// Errors the next sends/edits answer, first first.
    refusals: Mutex<VecDeque<ChannelError>>,
    /// Errors the next file sends answer, first first.
    file_refusals: Mutex<VecDeque<ChannelError>>,
    calls: Mutex<Vec<(Instant, String)>>,
    /// The bytes of each file sent, by name.
    uploads: Mutex<Vec<(String, Vec<u8>)>>,
    /// Run once, when the next file send comes (before it is answered).
    on_file: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    next_id: Mutex<u64>,
    /// When it was made; call times are measured from here.
    pub start: Instant,
}

impl TestChannel {
    /// A channel with `edit_interval_ms` between preview edits.
    pub fn new(edit_interval_ms: u64) -> Arc<TestChannel> {
        Self::built(4000, edit_interval_ms, false)
    }

    /// A channel whose messages hold at most `max_chars`; private command answers are
    /// supported unless `no_command_answers`.
    pub fn answering(max_chars: usize, no_command_answers: bool) -> Arc<TestChannel> {
        Self::built(max_chars, 0, no_command_answers)
    }

    fn built(
        max_chars: usize,
        edit_interval_ms: u64,
        no_command_answers: bool,
    ) -> Arc<TestChannel> {
        Arc::new(TestChannel {
            limits: Limits {
                max_chars,
                max_lines: None,
                edit_interval_ms,
                group_edit_interval_ms: edit_interval_ms,
                threads: false,
            },
            no_command_answers,
            refusals: Mutex::new(VecDeque::new()),
            file_refusals: Mutex::new(VecDeque::new()),
            calls: Mutex::new(Vec::new()),
            uploads: Mutex::new(Vec::new()),
            on_file: Mutex::new(None),
            next_id: Mutex::new(0),
            start: Instant::now(),
        })
    }

    /// Makes the next sends, edits or command answers fail with `errors`, in order.
    pub fn refuse(&self, errors: impl IntoIterator<Item = ChannelError>) {
        self.refusals.lock().unwrap().extend(errors);
    }

    /// Makes the next file sends fail with `errors`, in order.
    pub fn refuse_files(&self, errors: impl IntoIterator<Item = ChannelError>) {
        self.file_refusals.lock().unwrap().extend(errors);
    }

    /// Runs `hook` when the next file send comes, before it is answered.
    pub fn on_next_file(&self, hook: impl FnOnce() + Send + 'static) {
        *self.on_file.lock().unwrap() = Some(Box::new(hook));
    }

    /// The name and bytes of each file sent (not refused), in order.
    pub fn uploads(&self) -> Vec<(String, Vec<u8>)> {
        self.uploads.lock().unwrap().clone()
    }

    /// What was asked (`send TEXT`, `edit TEXT`, `delete ID`, `answer HANDLE: TEXT`,
    /// `react ID EMOJI`, `pin ID`, `poll QUESTION [A|B]`), in order; refused calls included.
    pub fn calls(&self) -> Vec<String> {
        self.timed().into_iter().map(|(_, call)| call).collect()
    }

    /// Each call with its time since the start, in ms.
    pub fn timed(&self) -> Vec<(u128, String)> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .map(|(at, what)| ((*at - self.start).as_millis(), what.clone()))
            .collect()
    }

    fn record(&self, what: String, refusable: bool) -> Result<(), ChannelError> {
        self.calls.lock().unwrap().push((Instant::now(), what));
        match refusable {
            true => self
                .refusals
                .lock()
                .unwrap()
                .pop_front()
                .map_or(Ok(()), Err),
            false => Ok(()),
        }
    }
}

/// A direct chat on the test channel.
pub fn direct_chat() -> Conversation {
    Conversation {
        channel: "test".into(),
        account: "default".into(),
        kind: ChatKind::Direct,
        chat_id: "7".into(),
        thread_id: None,
    }
}

impl Channel for TestChannel {
    fn name(&self) -> &str {
        "test"
    }
    fn limits(&self) -> Limits {
        self.limits.clone()
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
            self.record(format!("send {text}"), true)?;
            let mut id = self.next_id.lock().unwrap();
            *id += 1;
            Ok(SentMessage {
                message_id: format!("s{id}"),
            })
        })
    }
    fn edit<'a>(
        &'a self,
        _to: &'a Conversation,
        _message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.record(format!("edit {text}"), true) })
    }
    fn delete<'a>(
        &'a self,
        _to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.record(format!("delete {}", message.message_id), false) })
    }
    fn react<'a>(
        &'a self,
        _to: &'a Conversation,
        message_id: &'a str,
        emoji: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.record(format!("react {message_id} {emoji}"), true) })
    }
    fn pin<'a>(
        &'a self,
        _to: &'a Conversation,
        message_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move { self.record(format!("pin {message_id}"), true) })
    }
    fn send_poll<'a>(
        &'a self,
        _to: &'a Conversation,
        poll: &'a chela_channel::Poll,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            let options = poll.options.join("|");
            self.record(format!("poll {} [{options}]", poll.question), true)?;
            let mut id = self.next_id.lock().unwrap();
            *id += 1;
            Ok(SentMessage {
                message_id: format!("s{id}"),
            })
        })
    }
    fn caption_limit(&self) -> usize {
        20
    }
    fn send_file<'a>(
        &'a self,
        _to: &'a Conversation,
        file: &'a chela_channel::OutboundFile,
        caption: Option<&'a str>,
        key: Option<&'a str>,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            let name = file.file_name();
            let name = if file.kind == chela_channel::kind_for_name(name) {
                name.to_owned()
            } else {
                format!("{name} as {}", file.kind.as_str())
            };
            let caption = caption.map(|c| format!(" [{c}]")).unwrap_or_default();
            let key = key.map(|k| format!(" #{k}")).unwrap_or_default();
            self.record(format!("file {name}{caption}{key}"), false)?;
            let hook = self.on_file.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
            if let Some(error) = self.file_refusals.lock().unwrap().pop_front() {
                return Err(error);
            }
            let chunks: Vec<Vec<u8>> = futures_util::TryStreamExt::try_collect(file.chunks())
                .await
                .map_err(|e| ChannelError::Rejected(e.to_string()))?;
            let bytes = chunks.concat();
            self.uploads
                .lock()
                .unwrap()
                .push((file.file_name().to_owned(), bytes));
            let mut id = self.next_id.lock().unwrap();
            *id += 1;
            Ok(SentMessage {
                message_id: format!("s{id}"),
            })
        })
    }
    fn answer_command<'a>(
        &'a self,
        _to: &'a Conversation,
        interaction: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            if self.no_command_answers {
                return Err(ChannelError::Unsupported("command answers"));
            }
            self.record(format!("answer {interaction}: {text}"), true)
        })
    }
}
