//! Start-up recovery and the reply journal: what an unfinished reply left in the chat is taken
//! back before its final is sent again; a delivered reply is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;

use chela_channel::{
    BoxFuture, Channel, ChannelError, ChatKind, Conversation, InboundSink, Limits, SentMessage,
};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::{Config, ProviderKind};
use crate::gateway::Gateway;
use crate::store::Store;

/// A channel that records what it is asked to do.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
}

impl Channel for Recorder {
    fn name(&self) -> &str {
        "rec"
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
        _to: &'a Conversation,
        text: &'a str,
    ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(format!("send {text}"));
            Ok(SentMessage {
                message_id: "new".into(),
            })
        })
    }
    fn edit<'a>(
        &'a self,
        _to: &'a Conversation,
        _message: &'a SentMessage,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(format!("edit {text}"));
            Ok(())
        })
    }
    fn delete<'a>(
        &'a self,
        _to: &'a Conversation,
        message: &'a SentMessage,
    ) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let id = &message.message_id;
            self.calls.lock().unwrap().push(format!("delete {id}"));
            Ok(())
        })
    }
}

fn chat() -> Conversation {
    Conversation {
        channel: "rec".into(),
        account: "default".into(),
        kind: ChatKind::Direct,
        chat_id: "7".into(),
        thread_id: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undelivered_final_replaces_what_its_reply_had_sent_and_delivered_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    {
        let store = Store::open(&path).unwrap();
        // A reply cut short while its final went out: a preview and a first part are in the
        // chat, the final is in the outbox.
        store.journal_sent("run-a", &chat(), "m1").await.unwrap();
        store.journal_sent("run-a", &chat(), "m2").await.unwrap();
        store
            .settle_turn("run-a", "agent:main:rec:dm:7", &chat(), "the final", &[])
            .await
            .unwrap();
        // A reply that was delivered; only its journal's removal was lost.
        store.journal_sent("run-900", &chat(), "m9").await.unwrap();
    }
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = path;
    config.agent.workspace = dir.path().join("ws");
    let channel = Arc::new(Recorder::default());
    let gateway = Gateway::start(config, vec![channel.clone() as Arc<dyn Channel>])
        .await
        .unwrap();

    let calls = channel.calls.lock().unwrap().clone();
    assert_eq!(calls, ["delete m1", "delete m2", "send the final"]);
    let store = &gateway.core().store;
    assert!(store.all_journals().unwrap().is_empty());
    assert!(store.undelivered().unwrap().is_empty());
}
