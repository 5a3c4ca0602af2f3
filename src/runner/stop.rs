//! Stopping a session where it runs, wherever the request arrived (`/stop`, the RPC's
//! `abort`): on a cluster the node that runs the session gets the stop as a call (the cluster
//! module's `peers`); outside a cluster, and for what this node holds, it happens here.

use crate::cluster::peers::{ANSWER_WITHIN, Body, NotSent};
use crate::cluster::{Placement, Stopped};
use crate::lane::{LaneError, Lanes, StopReport};
use crate::store::Store;

/// Stops sessions over the handles a stop uses: the store (sub-agents), the lanes, and
/// where sessions run.
pub struct Stopper<'a> {
    store: &'a Store,
    lanes: &'a Lanes,
    placement: &'a dyn Placement,
}

impl<'a> Stopper<'a> {
    /// A stopper over `store`, `lanes` and `placement`.
    pub fn new(store: &'a Store, lanes: &'a Lanes, placement: &'a dyn Placement) -> Self {
        Stopper {
            store,
            lanes,
            placement,
        }
    }

    /// Stops session `key` (its run and queued turns; with `children`, its sub-agents) on
    /// the node that runs it.
    pub async fn stop(&self, key: &str, children: bool) -> Stopped {
        stop(self, key, children).await
    }

    /// Another node's call to stop `session`: the answer (whether it ran here).
    pub async fn answer(&self, session: &str, children: bool) -> Body {
        let held = self.placement.cluster().is_some_and(|c| c.owns(session));
        if !held {
            return stopped_body(None);
        }
        match stop_here(self, session, children).await {
            Stopped::Here(report, n) => stopped_body(Some(report.map(|r| (r, n)))),
            _ => stopped_body(None),
        }
    }
}

/// See [`Stopper::stop`].
async fn stop(stopper: &Stopper<'_>, key: &str, children: bool) -> Stopped {
    let Some(cluster) = stopper.placement.cluster().filter(|c| !c.owns(key)) else {
        return stop_here(stopper, key, children).await;
    };
    // A partition that moves meanwhile is looked up once more.
    for _ in 0..2 {
        let owner = match cluster.owner_of(key).await {
            Ok(Some(owner)) => owner,
            Ok(None) => return Stopped::Nowhere,
            Err(_) => return Stopped::Unknown,
        };
        if owner == cluster.node() {
            return stop_here(stopper, key, children).await;
        }
        let session = key.to_owned();
        let body = Body::Stop { session, children };
        let answer = cluster
            .peers()
            .ask(Some(&owner), body, 1, ANSWER_WITHIN, |_| true)
            .await;
        if let Some(stopped) = stopped_there(owner, answer) {
            return stopped;
        }
    }
    Stopped::Nowhere
}

/// What node `owner`'s `answer` to a stop says; `None` when it no longer runs the session
/// (to be looked up again).
fn stopped_there(owner: String, answer: Result<Vec<(String, Body)>, NotSent>) -> Option<Stopped> {
    let answers = match answer {
        Ok(answers) => answers,
        Err(NotSent) => return Some(Stopped::NotHanded(owner, false)),
    };
    let stopped = match answers.into_iter().next() {
        Some((
            _,
            Body::Stopped {
                runs_here: false, ..
            },
        )) => return None,
        Some((_, Body::Stopped { closed: true, .. })) => {
            Stopped::There(owner, Some(Err(LaneError::Closed)))
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
            Stopped::There(owner, Some(Ok((report, children))))
        }
        Some((_, Body::Busy)) => Stopped::NotHanded(owner, true),
        _ => Stopped::There(owner, None),
    };
    Some(stopped)
}

/// Stops session `key` here.
async fn stop_here(stopper: &Stopper<'_>, key: &str, children: bool) -> Stopped {
    let report = stopper.lanes.stop(key).await;
    let stopped = match children {
        true => super::subagents::stop_children(stopper.store, stopper.lanes, key).await,
        false => 0,
    };
    Stopped::Here(report, stopped)
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

    #[test]
    fn a_stop_not_sent_is_told_from_one_not_confirmed() {
        let owner = || "b".to_owned();
        assert!(matches!(
            stopped_there(owner(), Err(NotSent)),
            Some(Stopped::NotHanded(node, false)) if node == "b"
        ));
        assert!(matches!(
            stopped_there(owner(), Ok(Vec::new())),
            Some(Stopped::There(node, None)) if node == "b"
        ));
        assert!(matches!(
            stopped_there(owner(), Ok(vec![(owner(), Body::Busy)])),
            Some(Stopped::NotHanded(_, true))
        ));
        assert!(stopped_there(owner(), Ok(vec![(owner(), stopped_body(None))])).is_none());
    }
}
