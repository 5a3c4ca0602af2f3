//! On a cluster, acting where the state lives, wherever the request arrived: a stop (the
//! RPC's `abort`, a Discord `/stop` slash command) acts on the node that runs the session,
//! and `/approve` reaches the exec approval on the node that asked it. The request goes to
//! the other nodes as a call ([`super::peers`]); outside a cluster, and for what this node
//! holds, everything happens here as on a single node.

use std::sync::Arc;

use super::Core;
use super::cluster::Cluster;
use super::peers::{ANSWER_WITHIN, Answered, Body, Envelope, WaitingApproval};
use super::questions::NotWaiting;
use crate::agent::approval::Approval;
use crate::lane::{LaneError, StopReport};
use crate::store::partition_of;

/// What stopping a session did.
#[derive(Debug)]
pub enum Stopped {
    /// This node runs the session (or runs every session): what the stop did here, and how
    /// many sub-agents it stopped.
    Here(Result<StopReport, LaneError>, usize),
    /// Node `.0` runs it: what it did there (`None`: it did not confirm in time).
    There(String, Option<Result<(StopReport, usize), LaneError>>),
    /// No node holds the session now: nothing of it runs (its queued turns, if any, run
    /// once a node takes it).
    Nowhere,
}

/// Stops session `key` (its run and queued turns; with `children`, its sub-agents) on the
/// node that runs it.
pub async fn stop(core: &Arc<Core>, key: &str, children: bool) -> Stopped {
    let Some(cluster) = core.cluster.as_ref().filter(|c| !c.owns(key)) else {
        return stop_here(core, key, children).await;
    };
    // A partition that moves meanwhile is looked up once more.
    for _ in 0..2 {
        let Some(owner) = owner_of(cluster, key).await else {
            return Stopped::Nowhere;
        };
        if owner == cluster.node() {
            return stop_here(core, key, children).await;
        }
        let session = key.to_owned();
        let body = Body::Stop { session, children };
        let answer = cluster
            .peers()
            .ask(Some(&owner), body, 1, ANSWER_WITHIN, |_| true)
            .await;
        match answer.into_iter().next() {
            Some((
                _,
                Body::Stopped {
                    runs_here: false, ..
                },
            )) => continue,
            Some((_, Body::Stopped { closed: true, .. })) => {
                return Stopped::There(owner, Some(Err(LaneError::Closed)));
            }
            Some((
                _,
                Body::Stopped {
                    cleared,
                    stopped_run,
                    children,
                    ..
                },
            )) => {
                let report = StopReport {
                    cleared,
                    stopped_run,
                };
                return Stopped::There(owner, Some(Ok((report, children))));
            }
            _ => return Stopped::There(owner, None),
        }
    }
    Stopped::Nowhere
}

/// Stops session `key` here.
async fn stop_here(core: &Arc<Core>, key: &str, children: bool) -> Stopped {
    let report = core.lanes.stop(key).await;
    let stopped = match children {
        true => super::subagent::stop_children(core, key).await,
        false => 0,
    };
    Stopped::Here(report, stopped)
}

/// The node holding the partition of session `key` now, if any.
async fn owner_of(cluster: &Cluster, key: &str) -> Option<String> {
    let partition = partition_of(key);
    let nodes = match cluster.coordinator().nodes().await {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot read which node runs a session");
            return None;
        }
    };
    nodes
        .into_iter()
        .find(|n| n.partitions.contains(&partition))
        .map(|n| n.id)
}

/// The other nodes whose heartbeat is recent (two leases, by this machine's clock): the
/// ones that should answer a call to every node.
async fn live_others(cluster: &Cluster) -> Vec<String> {
    let now = crate::domain::message::now_ms();
    let recent = 2 * u64::try_from(cluster.lease().as_millis()).unwrap_or(u64::MAX);
    match cluster.coordinator().nodes().await {
        Ok(nodes) => nodes
            .into_iter()
            .filter(|n| n.id != cluster.node() && now.saturating_sub(n.last_seen_ms) < recent)
            .map(|n| n.id)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot list the other nodes");
            Vec::new()
        }
    }
}

/// What answering an exec approval did, and the live nodes that did not say (they may hold
/// it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    /// Where the answer went.
    pub outcome: Answered,
    /// Nodes that did not answer in time.
    pub silent: Vec<String>,
}

/// Answers exec approval `id` with `decision`, here or on the node that asked it.
pub async fn approve(core: &Arc<Core>, id: &str, decision: Approval) -> Approved {
    let here = answered(core.approvals.answer(id, decision));
    let done = |outcome| Approved {
        outcome,
        silent: Vec::new(),
    };
    let Some(cluster) = core.cluster.as_ref().filter(|_| here == Answered::Unknown) else {
        return done(here);
    };
    let others = live_others(cluster).await;
    let body = Body::Approve {
        id: id.to_owned(),
        decision: decision_word(decision).to_owned(),
    };
    let known = |b: &Body| matches!(b, Body::Approved { outcome } if *outcome != Answered::Unknown);
    let answers = cluster
        .peers()
        .ask(None, body, others.len(), ANSWER_WITHIN, known)
        .await;
    if let Some((_, Body::Approved { outcome })) = answers.iter().find(|(_, b)| known(b)) {
        return done(outcome.clone());
    }
    Approved {
        outcome: Answered::Unknown,
        silent: silent(others, &answers),
    }
}

/// The exec approvals waiting on every node (this one's first), with the live nodes that
/// did not say.
pub async fn waiting_approvals(core: &Arc<Core>) -> (Vec<WaitingApproval>, Vec<String>) {
    let mut waiting = local_approvals(core);
    let Some(cluster) = &core.cluster else {
        return (waiting, Vec::new());
    };
    let others = live_others(cluster).await;
    let answers = cluster
        .peers()
        .ask(
            None,
            Body::ListApprovals,
            others.len(),
            ANSWER_WITHIN,
            |_| false,
        )
        .await;
    for (_, body) in &answers {
        if let Body::Approvals { waiting: theirs } = body {
            waiting.extend(theirs.iter().cloned());
        }
    }
    (waiting, silent(others, &answers))
}

/// Of `others`, those without an answer among `answers`.
fn silent(others: Vec<String>, answers: &[(String, Body)]) -> Vec<String> {
    others
        .into_iter()
        .filter(|n| !answers.iter().any(|(a, _)| a == n))
        .collect()
}

/// At most this many approvals, each command at most this many characters, go in one
/// answer, and only while their JSON stays within [`LISTED_BYTES`] (it must fit in a
/// notification, escapes and all).
const LISTED: usize = 20;
const LISTED_CHARS: usize = 200;
const LISTED_BYTES: usize = 6_000;
/// Most characters of the command an approval's answer names (a heredoc can be long).
const ANSWERED_CHARS: usize = 300;

/// The approvals waiting here.
fn local_approvals(core: &Core) -> Vec<WaitingApproval> {
    let mut bytes = 0;
    core.approvals
        .list()
        .into_iter()
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
pub(super) fn answered(result: Result<String, NotWaiting>) -> Answered {
    match result {
        Ok(command) => Answered::Done {
            command: shortened(&command, ANSWERED_CHARS),
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

/// Answers a call another node made to this one.
pub(super) async fn answer(core: &Arc<Core>, question: Envelope) {
    let Some(cluster) = &core.cluster else { return };
    let body = match question.body {
        Body::Stop { session, children } => {
            if !cluster.owns(&session) {
                stopped_body(None)
            } else {
                match stop_here(core, &session, children).await {
                    Stopped::Here(report, n) => stopped_body(Some(report.map(|r| (r, n)))),
                    _ => stopped_body(None),
                }
            }
        }
        Body::Approve { id, decision } => {
            let decision = Approval::parse(&decision).unwrap_or(Approval::Deny);
            Body::Approved {
                outcome: answered(core.approvals.answer(&id, decision)),
            }
        }
        Body::ListApprovals => Body::Approvals {
            waiting: local_approvals(core),
        },
        Body::Stopped { .. } | Body::Approved { .. } | Body::Approvals { .. } => return,
    };
    cluster
        .peers()
        .answer(&question.from, question.call, body)
        .await;
}

/// The answer to a stop: `None` when this node does not run the session.
fn stopped_body(done: Option<Result<(StopReport, usize), LaneError>>) -> Body {
    let (report, children) = match &done {
        Some(Ok((report, children))) => (*report, *children),
        _ => (StopReport::default(), 0),
    };
    Body::Stopped {
        runs_here: done.is_some(),
        closed: matches!(done, Some(Err(_))),
        cleared: report.cleared,
        stopped_run: report.stopped_run,
        children,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn answers_stay_small_enough_for_a_notification() {
        let long = "x".repeat(10_000);
        let Answered::Done { command } = answered(Ok(long)) else {
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
    fn a_stop_answer_says_whether_it_ran_here() {
        assert!(matches!(
            stopped_body(None),
            Body::Stopped {
                runs_here: false,
                ..
            }
        ));
        let report = StopReport {
            cleared: 1,
            stopped_run: true,
        };
        assert_eq!(
            stopped_body(Some(Ok((report, 2)))),
            Body::Stopped {
                runs_here: true,
                closed: false,
                cleared: 1,
                stopped_run: true,
                children: 2,
            }
        );
        assert!(matches!(
            stopped_body(Some(Err(LaneError::Closed))),
            Body::Stopped { closed: true, .. }
        ));
    }
}
