//! The reach rule: its own session and sub-agents for every run, other sessions for an
//! owner's run or where the operator opened them, and who counts as an owner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use chela_channel::Channel;

use super::*;
use crate::config::{AgentEntry, Config, ProviderKind};
use crate::gateway::Gateway;
use crate::store::{SubagentLink, SubagentState};
use crate::test_channel::{TestChannel, direct_chat};

const OWN: &str = "agent:main:test:direct:8";
const CHILD: &str = "agent:main:subagent:c1";
const OTHER: &str = "agent:main:test:direct:7";
const OTHER_AGENT: &str = "agent:coder:test:direct:7";

fn reach(owner: bool, open: bool, cross_agent: bool) -> Reach {
    Reach {
        own: OWN.into(),
        agent: "main".into(),
        children: [CHILD.to_owned()].into(),
        owner,
        open,
        cross_agent,
    }
}

fn agent_of(key: &str) -> &'static str {
    if key.starts_with("agent:coder:") {
        "coder"
    } else {
        "main"
    }
}

fn refusal(reach: &Reach, key: &str) -> Option<String> {
    reach
        .check_agent(key, agent_of(key))
        .err()
        .map(|e| e.to_string())
}

#[test]
fn a_run_reaches_its_own_session_and_subagents_and_others_only_as_owner_or_when_opened() {
    for (owner, open, cross) in [
        (false, false, false),
        (true, false, true),
        (false, true, false),
    ] {
        let r = reach(owner, open, cross);
        assert_eq!(refusal(&r, OWN), None);
        assert_eq!(refusal(&r, CHILD), None);
    }
    let plain = reach(false, false, true);
    let refused = refusal(&plain, OTHER).unwrap();
    assert!(refused.starts_with("not your conversation"), "{refused}");
    assert!(refused.contains("sessions = \"all\""), "{refused}");
    assert!(refusal(&plain, "agent:main:subagent:someone-elses").is_some());
    assert!(refusal(&plain, OTHER_AGENT).is_some());
    // An owner's run, or one the operator opened, reaches the agent's other sessions; another
    // agent's only with cross_agent_sessions.
    for (owner, open) in [(true, false), (false, true)] {
        assert_eq!(refusal(&reach(owner, open, false), OTHER), None);
        let refused = refusal(&reach(owner, open, false), OTHER_AGENT).unwrap();
        assert!(refused.contains("cross_agent_sessions"), "{refused}");
        assert_eq!(refusal(&reach(owner, open, true), OTHER_AGENT), None);
    }
}

fn turn(key: &str, channel: &str, sender: &str) -> PendingTurn {
    let mut turn = crate::store::contract_tests::turn(key, &format!("{channel}-{sender}"));
    turn.inbound.conversation.channel = channel.into();
    turn.inbound.sender.id = sender.into();
    turn
}

#[test]
fn owner_rights_need_every_message_of_the_run_from_an_owner() {
    let group = "agent:main:telegram:group:-5";
    let owner = |inbound: &Inbound| inbound.sender.id == "7";
    let run = vec![
        (10, turn(group, "telegram", "7")),
        (11, turn("agent:main:other", "telegram", "9")),
    ];
    assert!(owners_only(&run, group, 10, owner));
    // A stranger's message steered into (or queued behind) the owner's run.
    let mut steered = run.clone();
    steered.push((12, turn(group, "telegram", "9")));
    assert!(!owners_only(&steered, group, 10, owner));
    // An earlier turn of the session does not count; a run not pending has no rights.
    let earlier = vec![
        (9, turn(group, "telegram", "9")),
        (10, turn(group, "telegram", "7")),
    ];
    assert!(owners_only(&earlier, group, 10, owner));
    assert!(!owners_only(&earlier, group, 11, owner));
}

/// A gateway on the test channel where `test:7` is an owner and agent `coder` has
/// `tools_sessions = "all"`.
async fn gateway(dir: &std::path::Path) -> Gateway {
    let mut config = Config::default();
    config.model.provider = ProviderKind::Echo;
    config.store.path = dir.join("store");
    config.agent.workspace = dir.join("ws");
    config.commands.owner_allow_from = vec!["test:7".into()];
    config.agents.push(AgentEntry {
        id: "coder".into(),
        workspace: Some(dir.join("ws-coder")),
        tools_sessions: Some(crate::config::SessionsReach::All),
        ..Default::default()
    });
    let channel = TestChannel::new(1_000);
    Gateway::start(config, vec![channel as Arc<dyn Channel>])
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_are_configured_owners_the_terminal_and_the_operator_token_never_the_client_token() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path()).await;
    let core = &gateway.reach_handles();
    let cases = [
        ("test", "7", true),
        ("test", "8", false),
        (TERMINAL_CHANNEL, "tester", true),
        (RPC_CHANNEL, RPC_OPERATOR_SENDER, true),
        (RPC_CHANNEL, crate::inbound::route::RPC_CLIENT_SENDER, false),
        ("test", SYSTEM_SENDER, false),
        (TERMINAL_CHANNEL, SYSTEM_SENDER, false),
    ];
    for (i, (channel, sender, owner)) in cases.into_iter().enumerate() {
        let key = format!("agent:main:case:{i}");
        let seq = core
            .store
            .enqueue(&turn(&key, channel, sender))
            .await
            .unwrap();
        let run = format!("run-{seq}");
        assert_eq!(
            asked_by_owner(core, &key, &run),
            owner,
            "{channel}:{sender}"
        );
        assert_eq!(Reach::of_run(core, &key, &run).unwrap().owner, owner);
        assert_eq!(
            Reach::of_run(core, &key, &run)
                .unwrap()
                .reaches(core, OTHER),
            owner,
            "{channel}:{sender}"
        );
    }
    // No pending turn, no rights.
    assert!(!asked_by_owner(core, "agent:main:case:0", "run-999"));
    assert!(!asked_by_owner(core, "agent:main:case:0", ""));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reaches_the_subagents_its_session_started_and_an_opened_agent_reaches_all() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path()).await;
    let core = &gateway.reach_handles();
    let link = SubagentLink {
        parent: OWN.into(),
        label: None,
        parent_target: Some(direct_chat()),
        created_ms: 0,
        state: SubagentState::Running,
    };
    let first = turn(CHILD, "subagent", SYSTEM_SENDER);
    core.store
        .spawn_subagent(CHILD, &link, &first)
        .await
        .unwrap();
    let plain = Reach::of_run(core, OWN, "").unwrap();
    assert!(plain.reaches(core, OWN));
    assert!(plain.reaches(core, CHILD));
    assert!(!plain.reaches(core, OTHER));
    // The child does not reach its parent.
    assert!(!Reach::of_run(core, CHILD, "").unwrap().reaches(core, OWN));
    // Agent coder's runs reach its other sessions (tools_sessions = "all"), not main's.
    let coder = Reach::of_run(core, "agent:coder:test:direct:8", "").unwrap();
    assert!(coder.reaches(core, OTHER_AGENT));
    assert!(!coder.reaches(core, OTHER));
    gateway.shutdown().await;
}
