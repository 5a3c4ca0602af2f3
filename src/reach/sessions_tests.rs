//! The `message` tool's files through the gateway: sent once per run, checked paths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use chela_channel::Channel;

use super::*;
use crate::config::{Config, ProviderKind};
use crate::gateway::Gateway;
use crate::test_channel::{TestChannel, direct_chat};

fn request(run_id: &str, attachments: &[&str]) -> FileSend {
    FileSend {
        from: "agent:main:test:direct:7".into(),
        run_id: run_id.into(),
        reply_to: Some(direct_chat()),
        target: None,
        text: "look".into(),
        attachments: attachments.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// The run `run_id` of session `key`, with no conversation of its own.
fn caller(key: &str, run_id: &str) -> Caller {
    Caller {
        session: key.into(),
        run_id: run_id.into(),
        reply_to: None,
    }
}

/// A gateway on the test channel with workspace `<dir>/ws` holding `out/a.png`.
async fn started(dir: &std::path::Path) -> (Gateway, Arc<TestChannel>, ReachTools) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("out")).unwrap();
    std::fs::write(ws.join("out/a.png"), b"png").unwrap();
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = ws.join("store");
    config.agent.workspace = ws.clone();
    let channel = TestChannel::new(1_000);
    let gateway = Gateway::start(config, vec![channel.clone() as Arc<dyn Channel>])
        .await
        .unwrap();
    let api = gateway.reach_tools();
    (gateway, channel, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_files_are_sent_once_per_run_and_paths_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), b"secret").unwrap();
    let (gateway, channel, api) = started(dir.path()).await;

    let first = api
        .send_files(request("run-5", &["out/a.png"]))
        .await
        .unwrap();
    assert!(first.starts_with("sent 1 file(s)"), "{first}");
    // The run going again after a crash asks for the same send: it is not repeated.
    let again = api
        .send_files(request("run-5", &["out/a.png"]))
        .await
        .unwrap();
    assert!(again.starts_with("already sent"), "{again}");
    // Another run may send the same file again.
    api.send_files(request("run-6", &["out/a.png"]))
        .await
        .unwrap();
    let files: Vec<String> = channel
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("file"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[0].starts_with("file a.png [look] #"), "{files:?}");

    for (bad, why) in [
        ("../secret.txt", "outside the workspace"),
        ("store/db", "chela's own files"),
        ("out/none.png", "does not exist"),
    ] {
        let refused = api.send_files(request("run-7", &[bad])).await.unwrap_err();
        assert!(refused.to_string().contains(why), "{bad}: {refused}");
    }
    assert_eq!(
        channel
            .calls()
            .iter()
            .filter(|c| c.starts_with("file"))
            .count(),
        2,
        "nothing refused was sent"
    );
    assert!(gateway.store().undelivered().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_refused_for_good_leaves_no_mark_so_the_run_may_try_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_gateway, channel, api) = started(dir.path()).await;
    // Refused as a picture, then as a document: a dead letter.
    let too_big = || chela_channel::ChannelError::Rejected("file too big".into());
    channel.refuse_files([too_big(), too_big()]);

    let failed = api
        .send_files(request("run-9", &["out/a.png"]))
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("file too big"), "{failed}");
    // The model tries the same send again in the same run: it goes, it is not "already sent".
    let again = api
        .send_files(request("run-9", &["out/a.png"]))
        .await
        .unwrap();
    assert!(again.starts_with("sent 1 file(s)"), "{again}");
    assert_eq!(channel.uploads().len(), 1, "the second try delivered it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reaches_only_its_own_sessions_unless_cross_agent_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let mine = "agent:main:test:direct:7";
    let theirs = "agent:coder:test:direct:8";
    for cross in [false, true] {
        let mut config = Config::default();
        config.model.provider = ProviderKind::Echo;
        config.store.path = dir.path().join(format!("store-{cross}"));
        config.agent.workspace = dir.path().join("ws");
        config.agents.push(crate::config::AgentEntry {
            id: "coder".into(),
            workspace: Some(dir.path().join("ws-coder")),
            ..Default::default()
        });
        config.tools.cross_agent_sessions = cross;
        // Every session of the agent is open: what is tested here is the agents' bound.
        config.tools.sessions = crate::config::SessionsReach::All;
        let channel = TestChannel::new(1_000);
        let gateway = Gateway::start(config, vec![channel as Arc<dyn Channel>])
            .await
            .unwrap();
        let core = &gateway.reach_handles();
        for key in [mine, theirs] {
            core.store.ensure_session(key, "/").unwrap();
            core.store
                .append_message(key, &Message::user("hello"))
                .unwrap();
            core.store.set_target(key, &direct_chat()).unwrap();
        }
        let api = gateway.reach_tools();
        let listed = api.list(&caller(mine, ""), 10).unwrap().join("\n");
        assert!(listed.contains(mine), "{listed}");
        assert_eq!(listed.contains(theirs), cross, "{listed}");
        let history = api.history(&caller(mine, ""), theirs, 10);
        let sent = api
            .send(caller(mine, ""), Some(theirs.into()), "hi".into())
            .await;
        if cross {
            assert_eq!(history.unwrap(), ["user: hello"]);
            assert!(sent.is_ok(), "{sent:?}");
        } else {
            let refused = history.unwrap_err().to_string();
            assert!(refused.contains("belongs to agent \"coder\""), "{refused}");
            let refused = sent.unwrap_err().to_string();
            assert!(refused.contains("cross_agent_sessions"), "{refused}");
        }
        // The other agent sees its own session either way.
        let listed = api.list(&caller(theirs, ""), 10).unwrap().join("\n");
        assert!(listed.contains(theirs), "{listed}");
        gateway.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_not_wholly_asked_by_an_owner_reaches_only_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let mine = "agent:main:test:direct:8";
    let owners = "agent:main:test:direct:7";
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = dir.path().join("store");
    config.agent.workspace = dir.path().join("ws");
    config.commands.owner_allow_from = vec!["test:7".into()];
    let channel = TestChannel::new(1_000);
    let gateway = Gateway::start(config, vec![channel.clone() as Arc<dyn Channel>])
        .await
        .unwrap();
    let core = &gateway.reach_handles();
    for key in [mine, owners] {
        core.store.ensure_session(key, "/").unwrap();
        core.store
            .append_message(key, &Message::user(format!("hello from {key}")))
            .unwrap();
        core.store.set_target(key, &direct_chat()).unwrap();
    }
    let api = gateway.reach_tools();
    // A run of user 8 (no owner).
    let mut turn = crate::store::contract_tests::turn(mine, "m1");
    turn.inbound.sender.id = "8".into();
    turn.inbound.conversation = direct_chat();
    let run = format!("run-{}", core.store.enqueue(&turn).await.unwrap());
    let listed = api.list(&caller(mine, &run), 10).unwrap().join("\n");
    assert!(
        listed.contains(mine) && !listed.contains(owners),
        "{listed}"
    );
    let refused = api.history(&caller(mine, &run), owners, 10).unwrap_err();
    assert!(
        refused.to_string().starts_with("not your conversation"),
        "{refused}"
    );
    let refused = api
        .send(caller(mine, &run), Some(owners.into()), "hi".into())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().starts_with("not your conversation"),
        "{refused}"
    );
    assert!(channel.calls().is_empty(), "{:?}", channel.calls());
    // Its own session it reads.
    let own = api.history(&caller(mine, &run), mine, 10).unwrap();
    assert_eq!(own, [format!("user: hello from {mine}")]);
    // A run of the owner (test:7) reaches the other session.
    let mut turn = crate::store::contract_tests::turn(owners, "o1");
    turn.inbound.sender.id = "7".into();
    turn.inbound.conversation = direct_chat();
    let run = format!("run-{}", core.store.enqueue(&turn).await.unwrap());
    let listed = api.list(&caller(owners, &run), 10).unwrap().join("\n");
    assert!(listed.contains(mine), "{listed}");
    assert_eq!(
        api.history(&caller(owners, &run), mine, 10).unwrap(),
        [format!("user: hello from {mine}")]
    );
    api.send(caller(owners, &run), Some(mine.into()), "hi".into())
        .await
        .unwrap();
    assert_eq!(channel.calls().len(), 1, "{:?}", channel.calls());
    gateway.shutdown().await;
}

/// The run's own session as `target` is the run's own conversation, never where the session
/// last replied: a client token's run in Ann's session key (or a DM sharing
/// `agent:main:main`) must not post into Ann's chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_own_session_as_target_is_the_runs_own_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway, _channel, api) = started(dir.path()).await;
    let anns = "agent:main:test:direct:7";
    let core = &gateway.reach_handles();
    core.store.ensure_session(anns, "/").unwrap();
    core.store.set_target(anns, &direct_chat()).unwrap();
    let mut elsewhere = direct_chat();
    elsewhere.chat_id = "99".into();
    let me = Caller {
        session: anns.into(),
        run_id: "run-1".into(),
        reply_to: Some(elsewhere),
    };
    let sent = api
        .send(me.clone(), Some(anns.into()), "hi".into())
        .await
        .unwrap();
    assert!(sent.contains("(test chat 99; message id "), "{sent}");
    let (key, to) = destination(core, me, Some(anns.into())).unwrap();
    assert_eq!((key.as_str(), to.chat_id.as_str()), (anns, "99"));
    gateway.shutdown().await;
}
