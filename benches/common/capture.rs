//! [`CaptureChannel`]: an in-memory channel for the benches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use chela_channel::{
    BoxFuture, Channel, ChannelError, Conversation, InboundSink, Limits, SentMessage,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// An in-memory channel: `send`/`edit` record the text per chat, `reply_done` wakes whoever
/// waits on that chat. Edits are unpaced (`edit_interval_ms` 0).
pub struct CaptureChannel {
    /// The channel name it registers under.
    name: &'static str,
    next_id: AtomicU64,
    sends: AtomicU64,
    edits: AtomicU64,
    /// Latest text shown per chat id (one entry per chat, so bounded by the sessions).
    texts: Mutex<HashMap<String, String>>,
    /// Per chat id: notified once per finished reply (a permit is kept if nobody waits yet).
    done: Mutex<HashMap<String, Arc<Notify>>>,
}

impl CaptureChannel {
    /// A capture channel named `name`.
    pub fn new(name: &'static str) -> Self {
        CaptureChannel {
            name,
            next_id: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            edits: AtomicU64::new(0),
            texts: Mutex::default(),
            done: Mutex::default(),
        }
    }

    /// Messages sent so far.
    pub fn sends(&self) -> u64 {
        self.sends.load(Ordering::Relaxed)
    }

    /// Edits made so far.
    pub fn edits(&self) -> u64 {
        self.edits.load(Ordering::Relaxed)
    }

    /// The notifier of chat `chat_id`, created on first use.
    pub fn waiter(&self, chat_id: &str) -> Arc<Notify> {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        done.entry(chat_id.to_string()).or_default().clone()
    }

    /// The latest text shown in chat `chat_id`.
    pub fn text(&self, chat_id: &str) -> String {
        let texts = self.texts.lock().unwrap_or_else(PoisonError::into_inner);
        texts.get(chat_id).cloned().unwrap_or_default()
    }

    fn record(&self, to: &Conversation, text: &str) {
        let mut texts = self.texts.lock().unwrap_or_else(PoisonError::into_inner);
        texts.insert(to.chat_id.clone(), text.to_string());
    }
}

impl Channel for CaptureChannel {
    fn name(&self) -> &str {
        self.name
    }

    fn limits(&self) -> Limits {
        Limits {
            max_chars: 4096,
            max_lines: None,
            edit_interval_ms: 0,
            group_edit_interval_ms: 0,
            threads: false,
        }
    }

    fn run(
        &self,
        _sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            shutdown.cancelled().await;
            Ok(())
        })
    }

    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            self.sends.fetch_add(1, Ordering::Relaxed);
            self.record(to, text);
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            Ok(SentMessage {
                message_id: id.to_string(),
            })
        })
    }

    fn edit<'a>(
        &'a self,
        to: &'a Conversation,
        _message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.edits.fetch_add(1, Ordering::Relaxed);
            self.record(to, text);
            Ok(())
        })
    }

    fn reply_done<'a>(&'a self, to: &'a Conversation) -> BoxFuture<'a, ()> {
        Box::pin(async move { self.waiter(&to.chat_id).notify_one() })
    }
}
