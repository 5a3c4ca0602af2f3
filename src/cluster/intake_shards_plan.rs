//! What one round of [`super::run_parts`] does with an intake's parts: the names it leases
//! and advertises, how the nodes that run the same layout are counted, and the plan (which
//! parts to give back, which to ask for).
//!
//! The share is the parts over the nodes that advertise the same layout (`discord#/4`),
//! rounded up; a node without that intake, with another number of parts, or whose intake
//! ended does not advertise it and is not counted. A node gives back parts over its share
//! only while another node of the layout is below its share (that node takes them at its
//! next round), and takes free parts over its share only while no other node of the layout
//! is below its share (nobody else would take them): the two conditions exclude each other,
//! so a part given back is never taken back by the same rule, and the nodes do not flap.

use std::collections::BTreeSet;

use crate::store::NodeInfo;

/// The layout of `channel`'s intake in `parts` parts (`discord#/4`): what a node advertises
/// while it runs them.
pub fn layout_name(channel: &str, parts: u32) -> String {
    format!("{channel}#/{parts}")
}

/// The lease name of part `part` of `parts` of `channel`'s intake.
pub fn part_lease_name(channel: &str, part: u32, parts: u32) -> String {
    format!(
        "{}#{part}/{parts}",
        super::super::intake_lease::lease_name(channel)
    )
}

/// The part of `parts` of `channel`'s intake that lease `name` is, if it is one.
pub fn part_of(name: &str, channel: &str, parts: u32) -> Option<u32> {
    let prefix = format!("{}#", super::super::intake_lease::lease_name(channel));
    let (part, of) = name.strip_prefix(&prefix)?.split_once('/')?;
    if of.parse::<u32>().ok()? != parts {
        return None;
    }
    part.parse().ok().filter(|p| *p < parts)
}

/// A node's share of `parts` when `runners` nodes run them: the parts over the nodes,
/// rounded up.
pub fn share(parts: u32, runners: usize) -> usize {
    (parts as usize).div_ceil(runners.max(1))
}

/// The nodes running a layout as one round sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// How many nodes run the layout, this one included.
    pub runners: usize,
    /// How many of the layout's parts each other node running it holds.
    pub others_held: Vec<usize>,
    /// The parts whose unexpired lease another node holds (whether it runs the layout or not).
    pub taken: BTreeSet<u32>,
}

impl View {
    /// This node alone (before the first count).
    pub fn alone() -> View {
        View {
            runners: 1,
            others_held: Vec::new(),
            taken: BTreeSet::new(),
        }
    }

    /// Whether another node running the layout holds fewer than `share` parts.
    pub fn others_below(&self, share: usize) -> bool {
        self.others_held.iter().any(|held| *held < share)
    }
}

/// The view of `channel`'s intake in `parts` parts from `nodes` (as the store lists them)
/// for node `me`, which always counts: the nodes advertising its layout (`nodes` lists only
/// unexpired adverts and leases).
pub fn view(nodes: &[NodeInfo], me: &str, channel: &str, parts: u32) -> View {
    let layout = layout_name(channel, parts);
    let mut view = View::alone();
    for node in nodes.iter().filter(|n| n.id != me) {
        let held: BTreeSet<u32> = node
            .intakes
            .iter()
            .filter_map(|lease| part_of(lease, channel, parts))
            .collect();
        if node.layouts.contains(&layout) {
            view.runners += 1;
            view.others_held.push(held.len());
        }
        view.taken.extend(held);
    }
    view
}

/// What one round does with the parts: which to give back, which to ask for (in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Held parts over the share, highest first.
    pub give_back: Vec<u32>,
    /// Parts neither held here, nor still stopping here, nor held elsewhere: asked for in
    /// order, lowest first, until `room` of them were won.
    pub ask: Vec<u32>,
    /// How many more parts to take.
    pub room: usize,
}

/// The round's plan for a node holding `held` (and still stopping `stopping`) of `parts`,
/// with a share of `share`, the others as `view` says.
pub fn plan(
    parts: u32,
    held: &BTreeSet<u32>,
    stopping: &BTreeSet<u32>,
    share: usize,
    view: &View,
) -> Plan {
    let others_below = view.others_below(share);
    let give_back = if others_below {
        held.iter()
            .rev()
            .take(held.len().saturating_sub(share))
            .copied()
            .collect()
    } else {
        Vec::new()
    };
    let room = if held.len() < share {
        share - held.len()
    } else if others_below {
        0
    } else {
        // Nobody else of the layout would take a free part: take it over the share.
        parts as usize
    };
    let ask = (0..parts)
        .filter(|p| !held.contains(p) && !stopping.contains(p) && !view.taken.contains(p))
        .collect();
    Plan {
        give_back,
        ask,
        room,
    }
}
