use std::sync::Arc;

use tokio::sync::oneshot;

use super::*;
use crate::store::Coordinator;
use crate::store::test_support::Bus;

const KEY: &[u8] = b"the store's call key";

/// A node on `bus`: its approvals, answered to the other nodes' calls as the gateway does.
fn node(bus: &Bus, id: &str) -> (Arc<Peers>, Arc<Approvals>) {
    let coordinator = bus.node(id);
    let mut rx = coordinator.remote_events().unwrap();
    let peers = Arc::new(Peers::new(coordinator));
    peers.set_key(KEY.to_vec());
    let approvals = Arc::new(Approvals::default());
    let (serving, local) = (peers.clone(), approvals.clone());
    tokio::spawn(async move {
        while let Some(payload) = rx.recv().await {
            if let Some(question) = serving.take(&payload)
                && let Some(body) = answer_call(&local, question.body.clone())
            {
                serving.answer(&question.from, question.call, body).await;
            }
        }
    });
    (peers, approvals)
}

/// Two node ids (other than `a`) that share an approval tag.
fn sharing_a_tag() -> (String, String) {
    let mut seen = std::collections::HashMap::new();
    for n in 0.. {
        let id = format!("node-{n}");
        if let Some(first) = seen.insert(approval_tag(&id), id.clone()) {
            return (first, id);
        }
    }
    unreachable!()
}

/// Whether `answer` got a decision.
fn answered_with(answer: &mut oneshot::Receiver<Approval>) -> Option<Approval> {
    answer.try_recv().ok()
}

fn live(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn tags_are_short_stable_and_differ_between_nodes() {
    assert_eq!(approval_tag("a"), approval_tag("a"));
    assert_eq!(approval_tag("a").len(), TAG_LEN);
    assert_ne!(approval_tag("node-1"), approval_tag("node-2"));
}

#[tokio::test(start_paused = true)]
async fn an_answer_reaches_only_the_node_whose_tag_starts_the_id() {
    let bus = Bus::default();
    let (a, _) = node(&bus, "a");
    let (_b, on_b) = node(&bus, "b");
    let (_c, on_c) = node(&bus, "c");
    // The same id waits on b and c (as two nodes' random ids could once): b gave it out.
    let id = format!("{}1234", approval_tag("b"));
    let mut at_b = on_b.open_as(&id, "kb", "ls b");
    let mut at_c = on_c.open_as(&id, "kc", "ls c");
    let local = Approvals::default();
    let approved = approve_among(
        &local,
        &a,
        &live(&["a", "b", "c"]),
        &id,
        Approval::AllowOnce,
    )
    .await;
    assert_eq!(
        approved,
        Approved::At {
            node: Some("b".into()),
            outcome: Answered::Done {
                command: "ls b".into(),
                place: String::new(),
                hidden: false,
            }
        }
    );
    assert_eq!(answered_with(&mut at_b), Some(Approval::AllowOnce));
    assert_eq!(answered_with(&mut at_c), None, "c was not asked to act");
    // An id no live node gives out: nobody is asked.
    let approved = approve_among(&local, &a, &live(&["a", "b"]), "zz", Approval::Deny).await;
    assert!(matches!(approved, Approved::Missing { .. }), "{approved:?}");
}

#[tokio::test(start_paused = true)]
async fn an_id_held_by_two_nodes_sharing_a_tag_is_answered_on_neither() {
    let (first, second) = sharing_a_tag();
    let bus = Bus::default();
    let (a, _) = node(&bus, "a");
    let (_p, on_first) = node(&bus, &first);
    let (_q, on_second) = node(&bus, &second);
    let nodes = live(&["a", &first, &second]);
    let id = format!("{}beef", approval_tag(&first));
    let mut at_first = on_first.open_as(&id, "k1", "rm x");
    let local = Approvals::default();
    // Only one of the two holds it: that one answers.
    let approved = approve_among(&local, &a, &nodes, &id, Approval::Deny).await;
    assert!(
        matches!(&approved, Approved::At { node: Some(n), .. } if *n == first),
        "{approved:?}"
    );
    assert_eq!(answered_with(&mut at_first), Some(Approval::Deny));
    // Both hold it: nothing is answered, and both are named.
    let mut at_first = on_first.open_as(&id, "k1", "rm x");
    let mut at_second = on_second.open_as(&id, "k2", "rm y");
    let approved = approve_among(&local, &a, &nodes, &id, Approval::AllowOnce).await;
    assert_eq!(
        approved,
        Approved::Ambiguous {
            nodes: vec![first.clone(), second.clone()]
        }
    );
    assert_eq!(answered_with(&mut at_first), None);
    assert_eq!(answered_with(&mut at_second), None);
    // Named with the node, it is answered there alone.
    let typed = format!("{id}@{second}");
    let approved = approve_among(&local, &a, &nodes, &typed, Approval::AllowOnce).await;
    assert!(
        matches!(&approved, Approved::At { node: Some(n), .. } if *n == second),
        "{approved:?}"
    );
    assert_eq!(answered_with(&mut at_second), Some(Approval::AllowOnce));
    assert_eq!(answered_with(&mut at_first), None);
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_cannot_be_sent_says_so() {
    let bus = Bus::default();
    let keyless = Peers::new(bus.node("a"));
    let (_b, on_b) = node(&bus, "b");
    let id = format!("{}0000", approval_tag("b"));
    let mut at_b = on_b.open_as(&id, "k", "ls");
    let local = Approvals::default();
    let approved = approve_among(&local, &keyless, &live(&["a", "b"]), &id, Approval::Deny).await;
    assert_eq!(
        approved,
        Approved::NotHanded {
            node: "b".into(),
            busy: false
        }
    );
    assert_eq!(answered_with(&mut at_b), None);
    // Handed over, but the node does not answer in time: not confirmed.
    let silent = Peers::new(bus.node("c"));
    silent.set_key(KEY.to_vec());
    let id = format!("{}0000", approval_tag("d"));
    let approved = approve_among(&local, &silent, &live(&["c", "d"]), &id, Approval::Deny).await;
    assert_eq!(approved, Approved::Unconfirmed { node: "d".into() });
}

#[tokio::test]
async fn this_nodes_own_ids_are_answered_here() {
    let bus = Bus::default();
    let (a, on_a) = node(&bus, "a");
    let (id, answer) = on_a.open_tagged(&approval_tag("a"), "k", "ls", "");
    let approved = approve_among(&on_a, &a, &live(&["a", "b"]), &id, Approval::AllowAlways).await;
    assert!(
        matches!(&approved, Approved::At { node: Some(n), outcome: Answered::Done { .. } } if n == "a"),
        "{approved:?}"
    );
    assert_eq!(answer.await.unwrap(), Approval::AllowAlways);
}

#[test]
fn a_listing_keeps_to_the_conversation_asked_in() {
    let local = Approvals::default();
    let group = "telegram|default|-100|";
    let _one = local.open_as_in("aa0001", "group-session", "ls", group);
    // A sub-agent's approval, asked in the group under its own session's key.
    let _two = local.open_as_in("aa0002", "agent:main:subagent:x", "pwd", group);
    let _three = local.open_as_in("aa0003", "group-session", "cat secrets", "discord|d|9|");
    let in_group = local_approvals(&local, Some(group), None);
    let ids: Vec<&str> = in_group.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, ["aa0001", "aa0002"]);
    assert_eq!(local_approvals(&local, None, None).len(), 3);
    let by_id = local_approvals(&local, None, Some("aa0003"));
    assert_eq!(by_id[0].command, "cat secrets");
    let answer = answer_call(
        &local,
        Body::ListApprovals {
            place: Some(group.into()),
            id: None,
        },
    );
    assert!(
        matches!(&answer, Some(Body::Approvals { waiting }) if waiting.len() == 2),
        "{answer:?}"
    );
    // An answer says where the approval was asked.
    let answered = answer_call(
        &local,
        Body::Approve {
            id: "aa0003".into(),
            decision: "deny".into(),
        },
    );
    assert!(
        matches!(&answered, Some(Body::Approved { outcome: Answered::Done { place, .. } }) if place == "discord|d|9|"),
        "{answered:?}"
    );
}

#[test]
fn answers_stay_small_enough_for_a_notification() {
    let long = "x".repeat(10_000);
    let Answered::Done { command, .. } = answered(Ok((long, String::new()))) else {
        panic!("not done");
    };
    assert_eq!(command.chars().count(), ANSWERED_CHARS + 1);
    assert!(command.ends_with('…'));
    assert_eq!(shortened("ünïcode", 3), "ünï…");
    assert_eq!(shortened("short", 10), "short");
}

#[test]
fn decisions_travel_as_the_words_that_parse_back() {
    for decision in [Approval::AllowOnce, Approval::AllowAlways, Approval::Deny] {
        assert_eq!(Approval::parse(decision_word(decision)), Some(decision));
    }
}

#[test]
fn a_node_named_on_a_lone_gateway_is_left_out() {
    let local = Approvals::default();
    let mut answer = local.open_as("abc123", "k", "ls");
    let approved = approve_alone(&local, "abc123@n1", Approval::AllowOnce);
    assert_eq!(
        approved,
        Approved::At {
            node: None,
            outcome: Answered::Done {
                command: "ls".into(),
                place: String::new(),
                hidden: false,
            }
        }
    );
    assert_eq!(answered_with(&mut answer), Some(Approval::AllowOnce));
}

/// Cluster node `id` whose store cannot read the nodes.
fn unreadable(id: &str) -> Cluster {
    let coordinator = Arc::new(crate::store::test_support::FakeCoordinator::new(id));
    coordinator
        .nodes_fail
        .store(true, std::sync::atomic::Ordering::SeqCst);
    Cluster::new(coordinator, std::time::Duration::from_secs(10))
}

#[tokio::test]
async fn nodes_that_cannot_be_read_are_said_so_not_taken_for_none() {
    let cluster = unreadable("a");
    let local = Approvals::default();
    let _mine = local.open_as(&format!("{}0001", approval_tag("a")), "k", "ls");
    let listed = list_in(&local, &cluster, None).await;
    assert_eq!(listed.waiting.len(), 1, "this node's own are listed");
    assert!(listed.unsent, "the others are unknown");
    let id = format!("{}0002", approval_tag("b"));
    let approved = approve_in(&local, &cluster, &id, Approval::Deny).await;
    assert_eq!(approved, Approved::Unlooked);
}

#[tokio::test]
async fn this_nodes_own_approvals_are_answered_when_the_nodes_cannot_be_read() {
    let cluster = unreadable("a");
    let local = Approvals::default();
    let done = Approved::At {
        node: Some("a".into()),
        outcome: Answered::Done {
            command: "ls".into(),
            place: String::new(),
            hidden: false,
        },
    };
    // Held here: answered, by id alone or naming this node.
    let first = format!("{}0001", approval_tag("a"));
    let mut answer = local.open_as(&first, "k", "ls");
    let approved = approve_in(&local, &cluster, &first, Approval::Deny).await;
    assert_eq!(approved, done);
    assert_eq!(answered_with(&mut answer), Some(Approval::Deny));
    let second = format!("{}0002", approval_tag("a"));
    let mut answer = local.open_as(&second, "k", "ls");
    let approved = approve_in(
        &local,
        &cluster,
        &format!("{second}@a"),
        Approval::AllowOnce,
    )
    .await;
    assert_eq!(approved, done);
    assert_eq!(answered_with(&mut answer), Some(Approval::AllowOnce));
    // Named here but no longer waiting: said so, not taken for unlooked.
    let approved = approve_in(&local, &cluster, &format!("{second}@a"), Approval::Deny).await;
    assert_eq!(
        approved,
        Approved::At {
            node: Some("a".into()),
            outcome: Answered::Unknown
        }
    );
    // Another node named: not looked for.
    let approved = approve_in(&local, &cluster, &format!("{second}@b"), Approval::Deny).await;
    assert_eq!(approved, Approved::Unlooked);
}
