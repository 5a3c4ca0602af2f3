//! Start-up recovery and the reply journal: what an unfinished reply left in the chat is taken
//! back before its final is sent again; a delivered reply is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chela_channel::Channel;

use super::*;
use crate::config::{Config, ProviderKind};
use crate::gateway::Gateway;
use crate::store::Store;
use crate::test_channel::{TestChannel, direct_chat};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undelivered_final_replaces_what_its_reply_had_sent_and_delivered_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    {
        let store = Store::open(&path).unwrap();
        let chat = direct_chat();
        // A reply cut short while its final went out: a preview and a first part are in the
        // chat, the final is in the outbox.
        store
            .journal_sent("run-a", &chat, "m1", true)
            .await
            .unwrap();
        store
            .journal_sent("run-a", &chat, "m2", true)
            .await
            .unwrap();
        store
            .settle_turn(
                &crate::domain::run::RunRecord::for_test("run-a", "agent:main:test:dm:7", &[]),
                true,
                &chat,
                "the final",
            )
            .await
            .unwrap();
        // A reply that was delivered; only its journal's removal was lost.
        store
            .journal_sent("run-900", &chat, "m9", true)
            .await
            .unwrap();
    }
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = path;
    config.agent.workspace = dir.path().join("ws");
    let channel = TestChannel::new(1_000);
    let gateway = Gateway::start(config, vec![channel.clone() as Arc<dyn Channel>])
        .await
        .unwrap();
    // The resend goes through the outbox worker.
    gateway.core.outbox.idle().await;

    assert_eq!(
        channel.calls(),
        ["delete m1", "delete m2", "send the final"]
    );
    let store = &gateway.core.store;
    assert!(store.all_journals().unwrap().is_empty());
    assert!(store.undelivered().unwrap().is_empty());
}
