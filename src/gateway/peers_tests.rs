use std::sync::Arc;

use super::*;
use crate::store::test_support::{Bus, FakeCoordinator};

/// How a node answers the questions it takes.
#[derive(Clone, Copy)]
enum Reply {
    /// With what the function says (nothing: left unanswered).
    With(fn(&Body) -> Option<Body>),
    /// Dispatched ([`Peers::dispatch`]) to handlers that never end.
    Stuck,
}

/// Peers over `node`, each question it takes answered by `reply` (or left unanswered).
fn serve(node: Arc<FakeCoordinator>, reply: fn(&Body) -> Option<Body>) -> Arc<Peers> {
    listen(node, Reply::With(reply))
}

/// Peers over `node` answering the questions it takes as `reply` says.
fn listen(node: Arc<FakeCoordinator>, reply: Reply) -> Arc<Peers> {
    let mut rx = node.remote_events().unwrap();
    let peers = Arc::new(Peers::new(node));
    peers.set_key(b"the store's call key".to_vec());
    let serving = peers.clone();
    tokio::spawn(async move {
        while let Some(payload) = rx.recv().await {
            assert!(is_call(&payload), "{payload}");
            let Some(question) = serving.take(&payload) else {
                continue;
            };
            match reply {
                Reply::With(answer) => {
                    if let Some(body) = answer(&question.body) {
                        serving.answer(&question.from, question.call, body).await;
                    }
                }
                Reply::Stuck => serving.dispatch(&question, std::future::pending()),
            }
        }
    });
    peers
}

fn stopped(runs_here: bool) -> Body {
    Body::Stopped {
        runs_here,
        closed: false,
        cleared: 2,
        stopped_run: runs_here,
        children: 0,
    }
}

#[tokio::test]
async fn a_call_to_one_node_is_answered_by_it_alone() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let _b = serve(bus.node("b"), |_| Some(stopped(true)));
    let _c = serve(bus.node("c"), |_| Some(stopped(false)));
    let stop = Body::Stop {
        session: "k".into(),
        children: true,
    };
    let answers = a
        .ask(Some("b"), stop, 1, ANSWER_WITHIN, |_| true)
        .await
        .unwrap();
    assert_eq!(answers, [("b".to_owned(), stopped(true))]);
}

#[tokio::test(start_paused = true)]
async fn answers_are_gathered_until_a_decisive_one_or_the_time_is_up() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let unknown = |_: &Body| {
        Some(Body::Approved {
            outcome: Answered::Unknown,
        })
    };
    let _b = serve(bus.node("b"), unknown);
    let _c = serve(bus.node("c"), |_| {
        Some(Body::Approved {
            outcome: Answered::Done {
                command: "ls".into(),
                place: String::new(),
            },
        })
    });
    let approve = || Body::Approve {
        id: "abc123".into(),
        decision: "deny".into(),
    };
    let decisive = |b: &Body| {
        matches!(
            b,
            Body::Approved {
                outcome: Answered::Done { .. }
            }
        )
    };
    let answers = a
        .ask(None, approve(), 2, ANSWER_WITHIN, decisive)
        .await
        .unwrap();
    assert!(
        answers.iter().any(|(n, b)| n == "c" && decisive(b)),
        "{answers:?}"
    );
    // A node that never answers: the others' answers once the time is up.
    let _d = serve(bus.node("d"), |_| None);
    let started = tokio::time::Instant::now();
    let answers = a
        .ask(None, approve(), 3, ANSWER_WITHIN, |_| false)
        .await
        .unwrap();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(started.elapsed() >= ANSWER_WITHIN);
    assert!(
        a.calls.lock().unwrap().is_empty(),
        "finished calls are forgotten"
    );
}

#[test]
fn a_call_is_told_from_an_event_batch() {
    let envelope = Envelope {
        call: 7,
        at: 1,
        nonce: "n".into(),
        from: "a".into(),
        to: None,
        body: Body::ListApprovals {
            place: None,
            id: None,
        },
        sig: String::new(),
    };
    let text = serde_json::to_string(&envelope).unwrap();
    assert!(is_call(&text), "{text}");
    assert!(!is_call(r#"{"node":"a","events":[]}"#));
    assert_eq!(serde_json::from_str::<Envelope>(&text).unwrap(), envelope);
}

#[tokio::test]
async fn calls_without_the_stores_key_are_dropped() {
    let approve = || Body::Approve {
        id: "abc123".into(),
        decision: "allow-once".into(),
    };
    let bus = Bus::default();
    let b = bus.node("b");
    let taker = Peers::new(b.clone());
    taker.set_key(b"the store's call key".to_vec());
    let question = Envelope {
        call: 1,
        at: crate::domain::message::now_ms(),
        nonce: "n1".into(),
        from: "x".into(),
        to: None,
        body: approve(),
        sig: String::new(),
    };
    // Unsigned, or signed with another key: dropped.
    let unsigned = serde_json::to_string(&question).unwrap();
    assert!(taker.take(&unsigned).is_none());
    let forger = Peers::new(bus.node("x"));
    forger.set_key(b"a guessed key".to_vec());
    let forged = Envelope {
        sig: forger.sign(&unsigned).unwrap(),
        ..question.clone()
    };
    assert!(
        taker
            .take(&serde_json::to_string(&forged).unwrap())
            .is_none()
    );
    // Signed with the store's key: taken.
    let peer = Peers::new(bus.node("x"));
    peer.set_key(b"the store's call key".to_vec());
    let signed = Envelope {
        sig: peer.sign(&unsigned).unwrap(),
        ..question
    };
    assert_eq!(
        taker
            .take(&serde_json::to_string(&signed).unwrap())
            .map(|e| e.body),
        Some(approve())
    );
    // Without a key nothing is sent, and the asker is told so.
    let keyless = Peers::new(bus.node("y"));
    assert_eq!(
        keyless
            .ask(None, approve(), 1, ANSWER_WITHIN, |_| true)
            .await,
        Err(NotSent)
    );
}

#[tokio::test(start_paused = true)]
async fn calls_over_the_bound_are_refused_as_busy() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let _b = listen(bus.node("b"), Reply::Stuck);
    let list = || Body::ListApprovals {
        place: None,
        id: None,
    };
    // CALLS_AT_ONCE calls are taken (their handlers never end: no answer in time).
    let taken: Vec<_> = (0..CALLS_AT_ONCE)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { a.ask(Some("b"), list(), 1, ANSWER_WITHIN, |_| true).await })
        })
        .collect();
    tokio::time::sleep(ANSWER_WITHIN / 2).await;
    // One more is refused at once, with an answer.
    let refused = a
        .ask(Some("b"), list(), 1, ANSWER_WITHIN, |_| true)
        .await
        .unwrap();
    assert_eq!(refused, [("b".to_owned(), Body::Busy)]);
    for call in taken {
        assert_eq!(call.await.unwrap(), Ok(Vec::new()), "not answered in time");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_is_handled_while_other_calls_fill_the_bound() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let _b = listen(bus.node("b"), Reply::Stuck);
    let list = || Body::ListApprovals {
        place: None,
        id: None,
    };
    let taken: Vec<_> = (0..CALLS_AT_ONCE)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { a.ask(Some("b"), list(), 1, ANSWER_WITHIN, |_| true).await })
        })
        .collect();
    tokio::time::sleep(ANSWER_WITHIN / 2).await;
    // A stop has a pool of its own: it is taken (and, stuck like the others, not answered
    // in time), not refused as busy.
    let stop = Body::Stop {
        session: "k".into(),
        children: false,
    };
    let stopped = a
        .ask(Some("b"), stop, 1, ANSWER_WITHIN, |_| true)
        .await
        .unwrap();
    assert_eq!(stopped, Vec::new(), "not refused as busy");
    for call in taken {
        assert_eq!(call.await.unwrap(), Ok(Vec::new()));
    }
}

/// `question` signed with the store's key, as sent.
fn signed_payload(question: &Envelope) -> String {
    let peer = Peers::new(Bus::default().node("x"));
    peer.set_key(b"the store's call key".to_vec());
    let unsigned = serde_json::to_string(question).unwrap();
    let signed = Envelope {
        sig: peer.sign(&unsigned).unwrap(),
        ..question.clone()
    };
    serde_json::to_string(&signed).unwrap()
}

#[test]
fn a_copy_of_a_call_or_an_old_one_is_dropped() {
    const NOW: u64 = 1_800_000_000_000;
    let taker = Peers::new(Bus::default().node("b"));
    taker.set_key(b"the store's call key".to_vec());
    let stop = |at: u64, nonce: &str| Envelope {
        call: 1,
        at,
        nonce: nonce.into(),
        from: "x".into(),
        to: Some("b".into()),
        body: Body::Stop {
            session: "k".into(),
            children: true,
        },
        sig: String::new(),
    };
    // A fresh call is taken; the same envelope sent again is not, even much later.
    let fresh = signed_payload(&stop(NOW - 1_000, "n1"));
    assert!(taker.take_at(&fresh, NOW).is_some());
    assert!(taker.take_at(&fresh, NOW).is_none(), "a copy");
    assert!(taker.take_at(&fresh, NOW + 10_000).is_none(), "a copy");
    assert!(
        taker.take_at(&fresh, NOW + 3_600_000).is_none(),
        "an old copy"
    );
    // One sent before the window, or after it, is not taken.
    let old = signed_payload(&stop(NOW - 31_000, "n2"));
    assert!(taker.take_at(&old, NOW).is_none(), "too old");
    let ahead = signed_payload(&stop(NOW + 31_000, "n3"));
    assert!(taker.take_at(&ahead, NOW).is_none(), "from the future");
    // Another call of the same node, sent just now, is.
    let next = signed_payload(&stop(NOW, "n4"));
    assert!(taker.take_at(&next, NOW).is_some());
    // The time and the nonce are signed: changed, the signature no longer holds.
    let moved = fresh.replace(&format!("{}", NOW - 1_000), &format!("{NOW}"));
    assert_ne!(moved, fresh);
    assert!(taker.take_at(&moved, NOW).is_none(), "time changed");
    let renamed = fresh.replace("\"n1\"", "\"n9\"");
    assert_ne!(renamed, fresh);
    assert!(taker.take_at(&renamed, NOW).is_none(), "nonce changed");
}

#[tokio::test]
async fn answers_are_fresh_too() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let _b = serve(bus.node("b"), |_| Some(stopped(true)));
    let stop = || Body::Stop {
        session: "k".into(),
        children: false,
    };
    // Every envelope a node sends carries a time and a nonce of its own.
    let answers = a.ask(Some("b"), stop(), 1, ANSWER_WITHIN, |_| true).await;
    assert_eq!(answers.unwrap().len(), 1);
    let one = a.envelope(1, None, stop());
    let two = a.envelope(1, None, stop());
    assert_ne!(one.nonce, two.nonce);
    assert!(one.at > 0);
}

#[tokio::test(start_paused = true)]
async fn a_busy_answer_never_holds_the_loop_taking_the_calls() {
    let node = Arc::new(FakeCoordinator::new("b"));
    let peers = Peers::new(node.clone());
    peers.set_key(b"the store's call key".to_vec());
    let list = |call: u64| Envelope {
        call,
        at: 1,
        nonce: format!("n{call}"),
        from: "a".into(),
        to: Some("b".into()),
        body: Body::ListApprovals {
            place: None,
            id: None,
        },
        sig: String::new(),
    };
    for call in 0..CALLS_AT_ONCE as u64 {
        peers.dispatch(&list(call), std::future::pending());
    }
    // The database does not answer: every busy answer would wait for it.
    node.publish_hangs
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    for call in 0..3 * CALLS_AT_ONCE as u64 {
        peers.dispatch(&list(100 + call), std::future::pending());
    }
    assert_eq!(started.elapsed(), Duration::ZERO, "nothing was waited for");
    assert_eq!(
        peers.refusing.available_permits(),
        0,
        "at most CALLS_AT_ONCE busy answers are on their way"
    );
    // Each gives up after ANSWER_WITHIN, and makes room.
    tokio::time::sleep(ANSWER_WITHIN + Duration::from_millis(1)).await;
    assert_eq!(peers.refusing.available_permits(), CALLS_AT_ONCE);
}
