//! Exec approvals on a cluster: `/approve <id>` typed on any node reaches the approval on
//! the one node that asked it, and a bare `/approve` gathers the waiting ones of every node.
//!
//! The id of an approval asked on a cluster node starts with the node's tag
//! ([`approval_tag`], two characters derived from its id), so the answer goes to the live
//! node(s) with that tag only, never to every node. Two live nodes may share a tag: then
//! they are asked who holds the id first, and the answer goes to the one that does; should
//! both hold it, nothing is answered and the reply names them, so the owner can answer
//! `/approve <id>@<node> ...`. Outside a cluster, everything happens here.

use super::Desk;
use super::{NotWaiting, PendingQuestions};
use crate::agent::approval::Approval;
use crate::cluster::Cluster;
use crate::cluster::peers::{ANSWER_WITHIN, Answered, Body, NotSent, Peers, WaitingApproval};

/// The exec approvals waiting on this node (as `approvals::Approvals`, named here so this
/// file does not point back at `approvals.rs`).
type Approvals = PendingQuestions<Approval>;

/// Characters of a node's tag at the start of its approval ids.
const TAG_LEN: usize = 2;
/// What a tag is written with.
const TAG_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// The tag that starts the approval ids node `node` gives out: two characters of an FNV-1a
/// hash of its id, the same on every node and version.
pub fn approval_tag(node: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in node.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let base = TAG_ALPHABET.len() as u64;
    (0..TAG_LEN)
        .map(|_| {
            let digit = usize::try_from(hash % base).unwrap_or(0);
            hash /= base;
            char::from(TAG_ALPHABET[digit])
        })
        .collect()
}

/// What answering an exec approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approved {
    /// The node holding it (`None`: outside a cluster) answered: `outcome`.
    At {
        /// The node, on a cluster.
        node: Option<String>,
        /// What became of the answer there.
        outcome: Answered,
    },
    /// The answer was handed to node `node`, which holds the approval, and it did not
    /// confirm in time (it may have acted).
    Unconfirmed {
        /// The node.
        node: String,
    },
    /// The answer could not be handed to node `node`: nothing was answered.
    NotHanded {
        /// The node.
        node: String,
        /// It refused as busy (else: the call could not be sent).
        busy: bool,
    },
    /// No node said it holds an approval with that id.
    Missing {
        /// Live nodes that may give out that id and did not say in time.
        silent: Vec<String>,
        /// Whether some of them could not even be asked (the call was not sent).
        unsent: bool,
    },
    /// Several nodes hold an approval with that id: nothing was answered.
    Ambiguous {
        /// The nodes.
        nodes: Vec<String>,
    },
    /// The approval is not on this node, and the live nodes could not be read (the
    /// database could not be reached), so it was not looked for elsewhere: nothing was
    /// answered.
    Unlooked,
}

/// Answers exec approval `typed` (`<id>` or `<id>@<node>`) with `decision`, here or on
/// the node that asked it.
pub async fn approve(desk: &Desk, typed: &str, decision: Approval) -> Approved {
    match &desk.cluster {
        Some(cluster) => approve_in(&desk.approvals, cluster, typed, decision).await,
        None => approve_alone(&desk.approvals, typed, decision),
    }
}

/// [`approve`] on a single gateway: a `@<node>` is left out (there is one node).
fn approve_alone(local: &Approvals, typed: &str, decision: Approval) -> Approved {
    let (id, _) = split_typed(typed);
    Approved::At {
        node: None,
        outcome: answered(local.answer_placed(id, decision)),
    }
}

/// [`approve`] on cluster node `cluster`, whose approvals `local` holds. When the live
/// nodes cannot be read, an approval of this node (it holds the id, or `typed` names it)
/// is still answered here; any other is [`Approved::Unlooked`].
async fn approve_in(
    local: &Approvals,
    cluster: &Cluster,
    typed: &str,
    decision: Approval,
) -> Approved {
    match cluster.live_nodes().await {
        Ok(live) => approve_among(local, cluster.peers(), &live, typed, decision).await,
        Err(_) => {
            let (id, named) = split_typed(typed);
            let me = cluster.node();
            let mine = match named {
                Some(node) => node == me,
                None => local.list().iter().any(|(i, _, _)| i == id),
            };
            if !mine {
                return Approved::Unlooked;
            }
            Approved::At {
                node: Some(me.to_owned()),
                outcome: answered(local.answer_placed(id, decision)),
            }
        }
    }
}

/// `typed` (`<id>` or `<id>@<node>`): the id, and the node it names.
pub fn split_typed(typed: &str) -> (&str, Option<&str>) {
    match typed.split_once('@') {
        Some((id, node)) => (id, Some(node)),
        None => (typed, None),
    }
}

/// Answers approval `typed` (`<id>` or `<id>@<node>`) on the node of `live` holding it;
/// `local` holds this node's approvals, `peers` calls the others.
pub(super) async fn approve_among(
    local: &Approvals,
    peers: &Peers,
    live: &[String],
    typed: &str,
    decision: Approval,
) -> Approved {
    let (id, named) = split_typed(typed);
    let me = peers.node();
    let candidates: Vec<String> = match named {
        Some(node) => vec![node.to_owned()],
        None => live
            .iter()
            .filter(|n| id.get(..TAG_LEN) == Some(approval_tag(n).as_str()))
            .cloned()
            .collect(),
    };
    let holder = match candidates.as_slice() {
        [one] => one.clone(),
        [] => {
            return Approved::Missing {
                silent: Vec::new(),
                unsent: false,
            };
        }
        several => match holders(local, peers, several, id).await {
            Ok(one) => one,
            Err(approved) => return approved,
        },
    };
    if holder == me {
        let outcome = answered(local.answer_placed(id, decision));
        return Approved::At {
            node: Some(holder),
            outcome,
        };
    }
    approve_at(peers, &holder, id, decision).await
}

/// Which of `candidates` (nodes sharing a tag) holds approval `id`: the one node, or what
/// to answer when none or several do.
async fn holders(
    local: &Approvals,
    peers: &Peers,
    candidates: &[String],
    id: &str,
) -> Result<String, Approved> {
    let me = peers.node();
    let mut holding = Vec::new();
    if candidates.iter().any(|n| n == me) && local.list().iter().any(|(i, _, _)| i == id) {
        holding.push(me.to_owned());
    }
    let others: Vec<&String> = candidates.iter().filter(|n| *n != me).collect();
    let asks = others.iter().map(|node| {
        let body = Body::ListApprovals {
            place: None,
            id: Some(id.to_owned()),
        };
        peers.ask(Some(node.as_str()), body, 1, ANSWER_WITHIN, |_| true)
    });
    let (mut silent, mut unsent) = (Vec::new(), false);
    for (node, answer) in others
        .iter()
        .zip(futures_util::future::join_all(asks).await)
    {
        match answer.as_deref() {
            Ok([(_, Body::Approvals { waiting })]) => {
                if waiting.iter().any(|w| w.id == id) {
                    holding.push((*node).clone());
                }
            }
            Ok(_) => silent.push((*node).clone()),
            Err(NotSent) => unsent = true,
        }
    }
    match holding.len() {
        1 => Ok(holding.remove(0)),
        0 => Err(Approved::Missing { silent, unsent }),
        _ => Err(Approved::Ambiguous { nodes: holding }),
    }
}

/// Hands the answer to approval `id` to node `node`, which holds it.
async fn approve_at(peers: &Peers, node: &str, id: &str, decision: Approval) -> Approved {
    let body = Body::Approve {
        id: id.to_owned(),
        decision: decision_word(decision).to_owned(),
    };
    let node = node.to_owned();
    match peers
        .ask(Some(&node), body, 1, ANSWER_WITHIN, |_| true)
        .await
    {
        Err(NotSent) => Approved::NotHanded { node, busy: false },
        Ok(answers) => match answers.into_iter().next() {
            Some((_, Body::Approved { outcome })) => Approved::At {
                node: Some(node),
                outcome,
            },
            Some((_, Body::Busy)) => Approved::NotHanded { node, busy: true },
            _ => Approved::Unconfirmed { node },
        },
    }
}

/// The waiting approvals gathered from the nodes, and who did not say.
#[derive(Debug, Default)]
pub struct Listed {
    /// This node's first, then the others'.
    pub waiting: Vec<WaitingApproval>,
    /// Live nodes that did not answer (in time, or as busy).
    pub silent: Vec<String>,
    /// The other nodes could not be looked up or asked (the database could not be
    /// reached): what waits there is unknown.
    pub unsent: bool,
}

/// The exec approvals waiting on every node (this one's first), of those asked in
/// conversation `place` (`approvals::place_of`) only when given.
pub async fn waiting_approvals(desk: &Desk, place: Option<&str>) -> Listed {
    match &desk.cluster {
        Some(cluster) => list_in(&desk.approvals, cluster, place).await,
        None => Listed {
            waiting: local_approvals(&desk.approvals, place, None),
            ..Listed::default()
        },
    }
}

/// [`waiting_approvals`] on cluster node `cluster`, whose approvals `local` holds.
async fn list_in(local: &Approvals, cluster: &Cluster, place: Option<&str>) -> Listed {
    let mut listed = Listed {
        waiting: local_approvals(local, place, None),
        ..Listed::default()
    };
    let Ok(live) = cluster.live_nodes().await else {
        listed.unsent = true;
        return listed;
    };
    let others: Vec<String> = live.into_iter().filter(|n| n != cluster.node()).collect();
    let body = Body::ListApprovals {
        place: place.map(str::to_owned),
        id: None,
    };
    let asked = cluster
        .peers()
        .ask(None, body, others.len(), ANSWER_WITHIN, |_| false)
        .await;
    let answers = asked.unwrap_or_else(|NotSent| {
        listed.unsent = true;
        Vec::new()
    });
    for (_, body) in &answers {
        if let Body::Approvals { waiting: theirs } = body {
            listed.waiting.extend(theirs.iter().cloned());
        }
    }
    if !listed.unsent {
        listed.silent = others
            .into_iter()
            .filter(|n| {
                !answers
                    .iter()
                    .any(|(a, b)| a == n && matches!(b, Body::Approvals { .. }))
            })
            .collect();
    }
    listed
}

/// Answers an approval call another node made to this one (`None`: not one).
pub fn answer_call(local: &Approvals, body: Body) -> Option<Body> {
    match body {
        Body::Approve { id, decision } => {
            let decision = Approval::parse(&decision).unwrap_or(Approval::Deny);
            Some(Body::Approved {
                outcome: answered(local.answer_placed(&id, decision)),
            })
        }
        Body::ListApprovals { place, id } => Some(Body::Approvals {
            waiting: local_approvals(local, place.as_deref(), id.as_deref()),
        }),
        _ => None,
    }
}

/// At most this many approvals, each command at most this many characters, go in one
/// answer, and only while their JSON stays within [`LISTED_BYTES`] (it must fit in a
/// notification, escapes and all).
const LISTED: usize = 20;
const LISTED_CHARS: usize = 200;
const LISTED_BYTES: usize = 6_000;
/// Most characters of the command an approval's answer names (a heredoc can be long).
const ANSWERED_CHARS: usize = 300;

/// The approvals waiting in `local`, asked in conversation `place` and with id `id` when
/// given.
fn local_approvals(
    local: &Approvals,
    place: Option<&str>,
    id: Option<&str>,
) -> Vec<WaitingApproval> {
    let mut bytes = 0;
    local
        .list_in(place)
        .into_iter()
        .filter(|(i, _, _)| id.is_none_or(|x| x == i))
        .take(LISTED)
        .map(|(id, session, command)| WaitingApproval {
            id,
            session,
            command: shortened(&command, LISTED_CHARS),
        })
        .take_while(|waiting| {
            bytes += serde_json::to_string(waiting).map_or(usize::MAX, |j| j.len());
            bytes <= LISTED_BYTES
        })
        .collect()
}

/// `text`'s first `most` characters, with `…` when it was longer.
fn shortened(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// An answer's outcome on this node (the command shortened, so it fits a notification).
pub(super) fn answered(result: Result<(String, String), NotWaiting>) -> Answered {
    match result {
        Ok((command, place)) => Answered::Done {
            command: shortened(&command, ANSWERED_CHARS),
            place,
            hidden: false,
        },
        Err(NotWaiting::Unknown) => Answered::Unknown,
        Err(NotWaiting::Gone) => Answered::Gone,
    }
}

/// `decision` as typed after `/approve <id>`.
fn decision_word(decision: Approval) -> &'static str {
    match decision {
        Approval::AllowAlways => "allow-always",
        Approval::AllowOnce => "allow-once",
        _ => "deny",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "remote_tests.rs"]
mod tests;
