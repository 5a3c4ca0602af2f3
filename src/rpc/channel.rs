//! The `rpc` channel: where replies to messages that came through the RPC go. Each `agent`
//! call is its own conversation (chat id = the call's id), so its final reply is recorded in
//! the outbox like any other and command answers can be told apart. Nothing is shown
//! anywhere: `agent.wait` answers with the run's text, and sent messages are published to
//! the RPC's run tracker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits, SentMessage,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// The channel name in conversations.
pub const NAME: &str = crate::inbound::route::RPC_CHANNEL;

/// Messages buffered for the tracker (a lagging tracker drops the oldest, and logs it).
const BUFFER: usize = 64;

/// A new message the gateway sent into an RPC conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcMessage {
    /// The conversation's chat id (the `agent` call's id).
    pub chat_id: String,
    /// Its text.
    pub text: String,
}

/// The `rpc` channel.
pub struct RpcChannel {
    messages: broadcast::Sender<RpcMessage>,
    next_id: AtomicU64,
}

impl RpcChannel {
    /// A new channel.
    pub fn new() -> Arc<RpcChannel> {
        let (messages, _) = broadcast::channel(BUFFER);
        Arc::new(RpcChannel {
            messages,
            next_id: AtomicU64::new(1),
        })
    }

    /// Receives the messages sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<RpcMessage> {
        self.messages.subscribe()
    }

    /// The conversation of one `agent` call.
    pub fn conversation(call_id: &str) -> Conversation {
        Conversation {
            channel: NAME.into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: call_id.into(),
            thread_id: None,
        }
    }
}

impl Channel for RpcChannel {
    fn name(&self) -> &str {
        NAME
    }

    fn limits(&self) -> Limits {
        Limits {
            max_chars: 1 << 20,
            max_lines: None,
            // Previews are not shown anywhere: edit rarely.
            edit_interval_ms: 60_000,
            group_edit_interval_ms: 60_000,
            threads: false,
        }
    }

    fn run(
        &self,
        _sink: Arc<dyn InboundSink>,
        _shutdown: CancellationToken,
    ) -> BoxFuture<'_, Result<(), ChannelError>> {
        // Intake is the RPC server, started on its own.
        Box::pin(async { Ok(()) })
    }

    fn send<'a>(
        &'a self,
        to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            // No receiver (the RPC is off) is fine: nobody is waiting.
            let _ = self.messages.send(RpcMessage {
                chat_id: to.chat_id.clone(),
                text: text.to_owned(),
            });
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            Ok(SentMessage {
                message_id: id.to_string(),
            })
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sends_are_published_with_their_conversation() {
        let channel = RpcChannel::new();
        let mut rx = channel.subscribe();
        let to = RpcChannel::conversation("call-1");
        let sent = channel.send(&to, "New session started.").await.unwrap();
        channel.edit(&to, &sent, "ignored").await.unwrap();
        let got = rx.recv().await.unwrap();
        assert_eq!(got.chat_id, "call-1");
        assert_eq!(got.text, "New session started.");
        assert!(rx.try_recv().is_err());
    }
}
