//! What the questions stage keeps: the messages still showing buttons, per node, and the
//! strangers approved while no gateway ran, both across a restart.

use chela_channel::{ChatKind, Conversation};

use super::Harness;
use crate::store::{OpenQuestion, PairingRequest};

fn open(id: &str, message_id: &str) -> OpenQuestion {
    OpenQuestion {
        id: id.into(),
        to: Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: ChatKind::Direct,
            chat_id: "42".into(),
            thread_id: None,
        },
        message_id: message_id.into(),
        text: "🔐 Approval needed".into(),
    }
}

/// Open questions are kept per node across a restart, replaced whole and cleared.
pub(crate) async fn open_questions_are_kept_per_node_across_a_restart(h: &dyn Harness) {
    let store = h.fresh();
    assert!(store.open_questions("").unwrap().is_empty());
    store
        .put_open_questions("", &[open("ab12", "7"), open("cd34", "8")])
        .unwrap();
    store
        .put_open_questions("n1", &[open("ef56", "9")])
        .unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(
        store.open_questions("").unwrap(),
        [open("ab12", "7"), open("cd34", "8")]
    );
    assert_eq!(store.open_questions("n1").unwrap(), [open("ef56", "9")]);
    store.put_open_questions("", &[open("cd34", "8")]).unwrap();
    store.put_open_questions("n1", &[]).unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.open_questions("").unwrap(), [open("cd34", "8")]);
    assert!(store.open_questions("n1").unwrap().is_empty());
}

/// The strangers approved while no gateway ran are kept in order across a restart.
pub(crate) async fn strangers_approved_offline_are_kept_across_a_restart(h: &dyn Harness) {
    let request = |sender: &str| PairingRequest {
        code: "ABCD2345".into(),
        channel: "telegram".into(),
        account: "default".into(),
        sender_id: sender.into(),
        sender_name: "Zed".into(),
        created_ms: 1,
    };
    let store = h.fresh();
    assert!(store.approved_offline().unwrap().is_empty());
    store
        .put_approved_offline(&[request("1"), request("2")])
        .unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(
        store.approved_offline().unwrap(),
        [request("1"), request("2")]
    );
    store.put_approved_offline(&[]).unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert!(store.approved_offline().unwrap().is_empty());
}
