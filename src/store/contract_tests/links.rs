//! [`BindingStore`](crate::store::BindingStore), [`PairingStore`](crate::store::PairingStore)
//! and [`CursorStore`](crate::store::CursorStore).

use std::path::PathBuf;

use super::{Harness, chat, turn};
use crate::store::{
    Binding, CODE_TTL_MS, MAX_PENDING, PairingOutcome, StoreError, SubagentLink, SubagentState,
};

fn binding(key: &str, created_ms: u64) -> Binding {
    Binding {
        session_key: key.into(),
        conversation: chat("-100"),
        harness: "codex".into(),
        cwd: PathBuf::from("/work"),
        acp_session_id: Some("s-1".into()),
        label: Some("fix".into()),
        owner: "telegram:1".into(),
        created_ms,
        last_active_ms: created_ms,
        idle_s: Some(60),
    }
}

/// Bindings are saved durably, listed in key order, replaced and removed.
pub(crate) async fn bindings_round_trip_durably(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.get_binding("b").unwrap(), None);
    store.put_binding(&binding("b", 1)).await.unwrap();
    store.put_binding(&binding("a", 2)).await.unwrap();
    store.put_binding(&binding("b", 3)).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.get_binding("b").unwrap(), Some(binding("b", 3)));
    let keys: Vec<String> = store
        .list_bindings()
        .unwrap()
        .into_iter()
        .map(|b| b.session_key)
        .collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(
        store.remove_binding("a").await.unwrap(),
        Some(binding("a", 2))
    );
    assert_eq!(store.remove_binding("a").await.unwrap(), None);
    let store = h.reopen(store);
    assert_eq!(store.list_bindings().unwrap(), [binding("b", 3)]);
}

fn link(parent: &str, created_ms: u64) -> SubagentLink {
    SubagentLink {
        parent: parent.into(),
        label: Some("child".into()),
        parent_target: Some(chat("1")),
        created_ms,
        state: SubagentState::Running,
    }
}

/// Spawning queues the child's turn with its link; finishing hands the result over once.
pub(crate) async fn subagent_links_spawn_stop_and_finish_once(h: &dyn Harness) {
    let store = h.fresh();
    let first = store
        .spawn_subagent("c2", &link("p", 20), &turn("c2", "1"))
        .await
        .unwrap();
    let other = store
        .spawn_subagent("c1", &link("p", 10), &turn("c1", "2"))
        .await
        .unwrap();
    store
        .spawn_subagent("c3", &link("q", 5), &turn("c3", "3"))
        .await
        .unwrap();
    let store = h.reopen(store);
    assert!(store.is_pending(first).unwrap());
    assert_eq!(store.subagent("c2").unwrap(), Some(link("p", 20)));
    assert_eq!(store.subagent_parent("c1").unwrap().as_deref(), Some("p"));
    assert_eq!(store.subagent_parent("p").unwrap(), None);
    let children: Vec<String> = store
        .subagents_of("p")
        .unwrap()
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(children, ["c1", "c2"], "oldest first");

    // A running child's follow-up is queued once, with its pending turn removed.
    let follow = turn("p", "follow-c2");
    let queued = store
        .finish_subagent("c2", &[first], Some(("f-c2", &follow)))
        .await
        .unwrap();
    let queued = queued.expect("the follow-up is queued");
    assert!(!store.is_pending(first).unwrap());
    assert_eq!(
        store.subagent("c2").unwrap().unwrap().state,
        SubagentState::Done
    );
    let again = store
        .finish_subagent("c2", &[], Some(("f-c2b", &follow)))
        .await
        .unwrap();
    assert_eq!(again, None, "settled once");

    // A stopped child reports nothing, but its turn is still removed.
    assert!(store.stop_subagent("c1").unwrap());
    assert!(!store.stop_subagent("c1").unwrap());
    let stopped = store
        .finish_subagent("c1", &[other], Some(("f-c1", &follow)))
        .await
        .unwrap();
    assert_eq!(stopped, None);
    assert!(!store.is_pending(other).unwrap());
    assert!(
        !store.stop_subagent("c1").unwrap(),
        "a finished child cannot stop"
    );

    let store = h.reopen(store);
    let pending: Vec<u64> = store
        .pending_for("p")
        .unwrap()
        .iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(pending, [queued]);
    let err = store
        .finish_subagent("nobody", &[], None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownSession(_)), "{err:?}");
}

/// Reply targets are kept per session.
pub(crate) async fn targets_are_remembered_per_session(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.target("k").unwrap(), None);
    store.set_target("k", &chat("1")).unwrap();
    store.set_target("k", &chat("2")).unwrap();
    store.set_target("j", &chat("3")).unwrap();
    assert_eq!(store.target("k").unwrap(), Some(chat("2")));
    assert_eq!(store.target("j").unwrap(), Some(chat("3")));
}

fn new_code(outcome: PairingOutcome) -> String {
    match outcome {
        PairingOutcome::New(code) => code,
        other => panic!("expected a new code, got {other:?}"),
    }
}

/// A code is issued once per sender and approved once; the first approval makes the owner.
pub(crate) async fn pairing_codes_approve_once_and_make_one_owner(h: &dyn Harness) {
    let store = h.fresh();
    let a = new_code(
        store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap(),
    );
    assert_eq!(a.len(), 8);
    let again = store
        .request_pairing("telegram", "default", "1", "Ann", 9)
        .unwrap();
    assert_eq!(again, PairingOutcome::Existing(a.clone()));
    let b = new_code(
        store
            .request_pairing("telegram", "default", "2", "Bo", 0)
            .unwrap(),
    );
    new_code(
        store
            .request_pairing("telegram", "default", "3", "Cy", 0)
            .unwrap(),
    );
    let elsewhere = store
        .request_pairing("telegram", "other", "4", "Di", 0)
        .unwrap();
    assert!(matches!(elsewhere, PairingOutcome::New(_)));
    assert_eq!(store.pairing_requests(1).unwrap().len(), 4);

    assert!(!store.is_paired("telegram", "default", "1").unwrap());
    let code = format!(" {} ", a.to_lowercase());
    let (request, owner) = store
        .approve_pairing("telegram", &code, 5, true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            request.sender_id.as_str(),
            request.sender_name.as_str(),
            owner
        ),
        ("1", "Ann", true)
    );
    let (_, owner) = store
        .approve_pairing("telegram", &b, 5, true)
        .await
        .unwrap()
        .unwrap();
    assert!(!owner, "only the first approval makes an owner");
    assert_eq!(
        store
            .approve_pairing("telegram", &a, 5, true)
            .await
            .unwrap(),
        None
    );

    let store = h.reopen(store);
    assert!(store.is_paired("telegram", "default", "1").unwrap());
    assert!(!store.is_paired("telegram", "other", "1").unwrap());
    assert!(store.is_paired_owner("telegram", "1").unwrap());
    assert!(!store.is_paired_owner("telegram", "2").unwrap());
    assert_eq!(store.pairing_requests(6).unwrap().len(), 2);
}

/// At most [`MAX_PENDING`] codes wait per channel account, one per sender: past it a new
/// sender is told when the oldest expires (nobody's code is taken back), a sender with a code
/// still gets it, and other accounts and channels are not held up (issue #32.4: three
/// strangers locked pairing for an hour).
pub(crate) async fn pairing_is_bounded_per_account_and_says_when_to_retry(h: &dyn Harness) {
    let store = h.fresh();
    let mut codes = Vec::new();
    for i in 0..MAX_PENDING {
        let sender = format!("s{i}");
        let at = 1_000 + i as u64;
        codes.push(new_code(
            store
                .request_pairing("telegram", "default", &sender, "x", at)
                .unwrap(),
        ));
    }
    let now = 5_000;
    let full = store
        .request_pairing("telegram", "default", "late", "x", now)
        .unwrap();
    assert_eq!(
        full,
        PairingOutcome::TooMany {
            retry_after_ms: 1_000 + CODE_TTL_MS + 1 - now
        }
    );
    let again = store
        .request_pairing("telegram", "default", "s0", "x", now)
        .unwrap();
    assert_eq!(again, PairingOutcome::Existing(codes[0].clone()));
    for (channel, account) in [("telegram", "other"), ("discord", "default")] {
        let outcome = store
            .request_pairing(channel, account, "late", "x", now)
            .unwrap();
        assert!(
            matches!(outcome, PairingOutcome::New(_)),
            "{channel}:{account}"
        );
    }
    // Every code handed out is still pending: none was evicted.
    let pending = store.pairing_requests(now).unwrap();
    for code in &codes {
        assert!(
            pending.iter().any(|r| &r.code == code),
            "{code} was dropped"
        );
    }
    // A rejected code makes room at once; so does the oldest expiring.
    store
        .reject_pairing("telegram", &codes[5], now)
        .await
        .unwrap()
        .unwrap();
    new_code(
        store
            .request_pairing("telegram", "default", "late", "x", now)
            .unwrap(),
    );
    let full = store
        .request_pairing("telegram", "default", "later", "x", now)
        .unwrap();
    assert!(matches!(full, PairingOutcome::TooMany { .. }), "{full:?}");
    let expired = 1_000 + CODE_TTL_MS + 1;
    let room = store
        .request_pairing("telegram", "default", "later", "x", expired)
        .unwrap();
    assert!(matches!(room, PairingOutcome::New(_)), "{room:?}");
}

/// Expired codes do not approve; a rejected code cannot be approved after.
pub(crate) async fn pairing_codes_expire_and_rejected_codes_do_not_approve(h: &dyn Harness) {
    let store = h.fresh();
    let a = new_code(
        store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap(),
    );
    let late = store
        .approve_pairing("telegram", &a, CODE_TTL_MS + 1, false)
        .await
        .unwrap();
    assert_eq!(late, None);
    let b = new_code(
        store
            .request_pairing("telegram", "default", "1", "Ann", 0)
            .unwrap(),
    );
    let rejected = store.reject_pairing("telegram", &b, 1).await.unwrap();
    assert_eq!(rejected.map(|r| r.sender_id), Some("1".to_string()));
    assert_eq!(store.reject_pairing("telegram", &b, 1).await.unwrap(), None);
    assert_eq!(
        store
            .approve_pairing("telegram", &b, 1, true)
            .await
            .unwrap(),
        None
    );
    assert!(!store.is_paired("telegram", "default", "1").unwrap());
    let c = new_code(
        store
            .request_pairing("telegram", "default", "1", "Ann", 2)
            .unwrap(),
    );
    let (_, owner) = store
        .approve_pairing("telegram", &c, 3, false)
        .await
        .unwrap()
        .unwrap();
    assert!(!owner, "no owner is made when owners are configured");
    assert!(store.is_paired("telegram", "default", "1").unwrap());
    assert!(!store.is_paired_owner("telegram", "1").unwrap());
    new_code(
        store
            .request_pairing("telegram", "default", "9", "Ed", 100)
            .unwrap(),
    );
    assert_eq!(store.pairing_requests(100).unwrap().len(), 1);
    assert!(
        store
            .pairing_requests(100 + CODE_TTL_MS + 1)
            .unwrap()
            .is_empty()
    );
}

/// Cursors are durable on return and listed by name suffix.
pub(crate) async fn cursors_are_durable_and_listed_by_suffix(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.get_cursor("telegram:a:offset").unwrap(), None);
    store.set_cursor("telegram:b:offset", 41).await.unwrap();
    store
        .set_cursor("telegram:a:offset", i64::MAX)
        .await
        .unwrap();
    store.set_cursor("telegram:b:offset", -7).await.unwrap();
    store.set_cursor("discord:x:resume", 3).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.get_cursor("telegram:b:offset").unwrap(), Some(-7));
    let offsets = store.cursors_ending(":offset").unwrap();
    assert_eq!(
        offsets,
        [
            ("telegram:a:offset".to_string(), i64::MAX),
            ("telegram:b:offset".to_string(), -7)
        ]
    );
}

/// A raised cursor only moves forward, and is durable on return.
pub(crate) async fn raised_cursors_only_move_forward(h: &dyn Harness) {
    let store = h.fresh();
    let name = "discord:a:last:1";
    store.raise_cursor(name, 10).await.unwrap();
    assert_eq!(
        store.get_cursor(name).unwrap(),
        Some(10),
        "a new one is set"
    );
    store.raise_cursor(name, 5).await.unwrap();
    assert_eq!(
        store.get_cursor(name).unwrap(),
        Some(10),
        "a late older write"
    );
    store.raise_cursor(name, 12).await.unwrap();
    store.set_cursor("discord:a:last:2", 3).await.unwrap();
    store.raise_cursor("discord:a:last:2", 1).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(
        store.cursors_starting("discord:a:last:").unwrap(),
        [
            ("discord:a:last:1".to_string(), 12),
            ("discord:a:last:2".to_string(), 3)
        ]
    );
}

/// Group lines are replaced per session, cleared, and listed by key.
pub(crate) async fn group_history_is_replaced_and_cleared(h: &dyn Harness) {
    let store = h.fresh();
    store.save_group_history("g2", &["c: x".into()]).unwrap();
    store.save_group_history("g1", &["a: hi".into()]).unwrap();
    store
        .save_group_history("g1", &["a: hi".into(), "b: yo".into()])
        .unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    let all = store.group_histories().unwrap();
    assert_eq!(
        all,
        [
            (
                "g1".to_string(),
                vec!["a: hi".to_string(), "b: yo".to_string()]
            ),
            ("g2".to_string(), vec!["c: x".to_string()])
        ]
    );
    store.clear_group_history("g1").unwrap();
    store.clear_group_history("none").unwrap();
    assert_eq!(store.group_histories().unwrap().len(), 1);
}

/// Group lines appended one by one keep the newest `per_group`; taking them forgets them.
pub(crate) async fn group_lines_are_appended_capped_and_taken_once(h: &dyn Harness) {
    let store = h.fresh();
    for i in 0..5 {
        store
            .append_group_line("g", &format!("a: m{i}"), 3, 10)
            .unwrap();
    }
    store.append_group_line("h", "b: x", 3, 10).unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(
        store.take_group_history("g").unwrap(),
        ["a: m2", "a: m3", "a: m4"]
    );
    assert!(store.take_group_history("g").unwrap().is_empty());
    assert_eq!(store.group_histories().unwrap().len(), 1, "h is kept");
}
