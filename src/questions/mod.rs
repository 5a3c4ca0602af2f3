//! The questions stage: what waits for an answer in the chat. A coding agent's permission
//! question (`ask.rs`, answered `allow` / `deny` in its bound conversation) and an exec
//! approval (`approvals.rs`, answered by id with `/approve`, from any conversation, on a
//! cluster on any node: `remote.rs`) each wait in a [`PendingQuestions`] (`pending.rs`)
//! until answered, timed out or stopped. Where the channel shows buttons (Telegram), an
//! exec approval is asked with Allow once / Always / Deny under it (`buttons.rs`); a press
//! (`press.rs`) answers it like `/approve`, by the same rule (owners only). A stranger's
//! pairing request is asked in each owner's DM with Approve / Reject (`pairing.rs`).
//!
//! The [`Desk`] owns both registries and takes what it uses at construction: the store, the
//! notices (to ask and to tell), this node of a cluster, and the timeouts. The agent's and
//! the coding agents' ports ([`Desk::approver`], [`Desk::askers`]) hold it weakly.

pub mod approvals;
pub mod ask;
pub mod buttons;
pub mod choices;
pub mod ledger;
pub mod offline;
pub mod pairing;
mod pending;
pub mod press;
pub mod remote;

use std::sync::Arc;
use std::time::Duration;

use crate::acp::permission::Decision;
use crate::agent::approval::Approval;
use crate::cluster::Cluster;
use crate::delivery::Notices;
use crate::store::Store;

pub use pending::{NotWaiting, PendingQuestions};

/// What [`Desk::new`] takes.
pub struct DeskParts {
    /// The store (where a sub-agent's parent last replied).
    pub store: Store,
    /// Where questions are asked and answers told.
    pub notices: Notices,
    /// This node, on a cluster (approvals asked on other nodes are reached by a call).
    pub cluster: Option<Arc<Cluster>>,
    /// The configured node id (`[cluster] node_id`), named in `/approve`'s answers alone.
    pub node_id: String,
    /// How long an exec approval waits (`[tools] approval_timeout_s`).
    pub approval_timeout: Duration,
    /// How long a coding agent's permission question waits (`[acp] ask_timeout_s`).
    pub ask_timeout: Duration,
}

/// The questions waiting in the chat, and how they are asked.
pub struct Desk {
    permissions: PendingQuestions<Decision>,
    approvals: PendingQuestions<Approval>,
    buttons: buttons::Buttons<Approval>,
    permission_buttons: buttons::Buttons<Decision>,
    pairing: pairing::PairingQuestions,
    choices: choices::Choices,
    ledger: ledger::Ledger,
    store: Store,
    notices: Notices,
    cluster: Option<Arc<Cluster>>,
    node_id: String,
    approval_timeout: Duration,
    ask_timeout: Duration,
}

impl Desk {
    /// The desk over `parts`, with nothing waiting.
    pub fn new(parts: DeskParts) -> Desk {
        Desk {
            permissions: PendingQuestions::default(),
            approvals: PendingQuestions::default(),
            buttons: buttons::Buttons::default(),
            permission_buttons: buttons::Buttons::default(),
            pairing: pairing::PairingQuestions::default(),
            choices: choices::Choices::default(),
            // A cluster node keeps its open questions only under a configured id.
            ledger: ledger::Ledger::new(
                parts.store.clone(),
                match (&parts.cluster, parts.node_id.as_str()) {
                    (None, _) => Some(""),
                    (Some(_), "") => None,
                    (Some(_), id) => Some(id),
                },
            ),
            store: parts.store,
            notices: parts.notices,
            cluster: parts.cluster,
            node_id: parts.node_id,
            approval_timeout: parts.approval_timeout,
            ask_timeout: parts.ask_timeout,
        }
    }

    /// Coding agents' permission questions waiting for `allow` / `deny`.
    pub fn permissions(&self) -> &PendingQuestions<Decision> {
        &self.permissions
    }

    /// Exec approvals waiting for `/approve` on this node.
    pub fn approvals(&self) -> &PendingQuestions<Approval> {
        &self.approvals
    }

    /// Answers a button press (by a bot owner when `owner`); see `press.rs`. A pairing
    /// request approved by it gives the stranger, to welcome (`pairing.rs`); a menu's
    /// choice, the command to take in (`choices.rs`).
    pub async fn press(
        &self,
        press: &chela_channel::Press,
        owner: bool,
    ) -> Option<press::AfterPress> {
        press::press(self, press, owner).await
    }

    /// At start: ends the questions with buttons a previous process left open in chats
    /// (their messages say so and lose their buttons; `ledger.rs`), and tells the strangers
    /// approved while no gateway ran that they are in (`offline.rs`).
    pub async fn end_left_open(&self) {
        self.ledger.end_left_open(&self.notices).await;
        offline::welcome(&self.store, &self.notices).await;
    }

    /// The agent's port for exec approvals.
    pub fn approver(self: &Arc<Self>) -> approvals::ChatApprover {
        approvals::ChatApprover {
            desk: Arc::downgrade(self),
        }
    }

    /// The coding agents' port for permission questions.
    pub fn askers(self: &Arc<Self>) -> ask::ChatAskers {
        ask::ChatAskers {
            desk: Arc::downgrade(self),
        }
    }
}
