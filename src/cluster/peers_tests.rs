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
                hidden: false,
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

fn list() -> Body {
    Body::ListApprovals {
        place: None,
        id: None,
    }
}

/// What node b, whose handlers never end, answers `extra`, asked by node a once
/// [`CALLS_AT_ONCE`] other calls fill b's bound (none of those is answered in time).
async fn over_a_full_bound(extra: Body) -> Vec<(String, Body)> {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let _b = listen(bus.node("b"), Reply::Stuck);
    let taken: Vec<_> = (0..CALLS_AT_ONCE)
        .map(|_| {
            let a = a.clone();
            tokio::spawn(async move { a.ask(Some("b"), list(), 1, ANSWER_WITHIN, |_| true).await })
        })
        .collect();
    tokio::time::sleep(ANSWER_WITHIN / 2).await;
    let answers = a
        .ask(Some("b"), extra, 1, ANSWER_WITHIN, |_| true)
        .await
        .unwrap();
    for call in taken {
        assert_eq!(call.await.unwrap(), Ok(Vec::new()), "not answered in time");
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn over_the_bound_calls_are_refused_as_busy_but_a_stop_has_a_pool_of_its_own() {
    let stop = Body::Stop {
        session: "k".into(),
        children: false,
    };
    let cases = [
        // One more call is refused at once, with an answer.
        (list(), vec![("b".to_owned(), Body::Busy)]),
        // A stop is taken (and, stuck like the others, not answered in time), not refused.
        (stop, Vec::new()),
    ];
    for (extra, expected) in cases {
        assert_eq!(
            over_a_full_bound(extra.clone()).await,
            expected,
            "{extra:?}"
        );
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

/// A time to run the freshness checks at (ms since the epoch).
const NOW: u64 = 1_800_000_000_000;

/// Node `id` (alone), with the store's key, as if started a minute before [`NOW`].
fn started_before_now(id: &str) -> Peers {
    let peers = Peers::new(Arc::new(FakeCoordinator::new(id)));
    peers.set_key(b"the store's call key".to_vec());
    *peers.seen.lock().unwrap() = Seen::since(NOW - 60_000);
    peers
}

/// A stop from node x to node b, sent at `at` with `nonce` (unsigned).
fn stop_to_b(at: u64, nonce: &str) -> Envelope {
    Envelope {
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
    }
}

#[test]
fn a_copy_of_a_call_or_an_old_one_is_dropped() {
    let taker = started_before_now("b");
    let stop = stop_to_b;
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

#[test]
fn a_call_sent_before_the_node_started_is_not_taken() {
    let before = crate::domain::message::now_ms();
    // A stop sent to b's previous life, just before it restarted, copied after.
    let earlier = signed_payload(&stop_to_b(before - 1_000, "n1"));
    let taker = Peers::new(Arc::new(FakeCoordinator::new("b")));
    taker.set_key(b"the store's call key".to_vec());
    let now = crate::domain::message::now_ms();
    assert!(
        taker.take_at(&earlier, now).is_none(),
        "sent before the start"
    );
    let later = signed_payload(&stop_to_b(now + 1_000, "n2"));
    assert!(taker.take_at(&later, now).is_some(), "sent after it");
}

#[test]
fn a_poisoned_seen_set_still_takes_calls() {
    let taker = started_before_now("b");
    let poisoned = std::thread::scope(|s| {
        s.spawn(|| {
            let _held = taker.seen.lock().unwrap();
            panic!("poisons the lock");
        })
        .join()
        .is_err()
    });
    assert!(poisoned && taker.seen.is_poisoned());
    let fresh = signed_payload(&stop_to_b(NOW - 1_000, "n1"));
    assert!(taker.take_at(&fresh, NOW).is_some());
    assert!(taker.take_at(&fresh, NOW).is_none(), "a copy");
}

#[test]
fn answers_are_fresh_too() {
    let asker = started_before_now("a");
    let (tx, mut rx) = mpsc::unbounded_channel();
    asker.calls.lock().unwrap().insert(7, tx);
    let answer = |at: u64, nonce: &str| Envelope {
        call: 7,
        at,
        nonce: nonce.into(),
        from: "b".into(),
        to: Some("a".into()),
        body: stopped(true),
        sig: String::new(),
    };
    // The answer reaches the asker once; a copy of it does not.
    let fresh = signed_payload(&answer(NOW - 1_000, "n1"));
    assert!(
        asker.take_at(&fresh, NOW).is_none(),
        "an answer is not a question"
    );
    assert_eq!(rx.try_recv().unwrap(), ("b".to_owned(), stopped(true)));
    assert!(asker.take_at(&fresh, NOW + 1_000).is_none());
    assert!(rx.try_recv().is_err(), "a copy reached the asker");
    // Nor does one sent outside the window.
    let old = signed_payload(&answer(NOW - 31_000, "n2"));
    assert!(asker.take_at(&old, NOW).is_none());
    assert!(rx.try_recv().is_err(), "an old answer reached the asker");
    // Every envelope a node sends carries a time and a nonce of its own.
    let one = asker.envelope(1, None, stopped(true));
    let two = asker.envelope(1, None, stopped(true));
    assert_ne!(one.nonce, two.nonce);
    assert!(one.at > 0);
}

#[tokio::test(start_paused = true)]
async fn a_busy_answer_never_holds_the_loop_taking_the_calls() {
    let bus = Bus::default();
    let a = serve(bus.node("a"), |_| None);
    let on_b = bus.node("b");
    let b = listen(on_b.clone(), Reply::Stuck);
    let ask = |body: Body| {
        let a = a.clone();
        tokio::spawn(async move { a.ask(Some("b"), body, 1, ANSWER_WITHIN, |_| true).await })
    };
    // b's handlers fill the bound.
    let taken: Vec<_> = (0..CALLS_AT_ONCE).map(|_| ask(list())).collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(b.handling.available_permits(), 0);
    // Then b's database stops answering: every busy answer would wait for it.
    on_b.publish_hangs
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let refused: Vec<_> = (0..3 * CALLS_AT_ONCE).map(|_| ask(list())).collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        b.refusing.available_permits(),
        0,
        "at most CALLS_AT_ONCE busy answers are on their way"
    );
    // The loop taking b's calls still takes the next one: a stop, in its own pool.
    let stop = ask(Body::Stop {
        session: "k".into(),
        children: false,
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        b.stopping.available_permits(),
        CALLS_AT_ONCE - 1,
        "the stop was taken"
    );
    // Each busy answer gives up after ANSWER_WITHIN, and makes room.
    tokio::time::sleep(ANSWER_WITHIN).await;
    assert_eq!(b.refusing.available_permits(), CALLS_AT_ONCE);
    for call in taken.into_iter().chain(refused).chain([stop]) {
        assert_eq!(call.await.unwrap(), Ok(Vec::new()), "not answered in time");
    }
}
