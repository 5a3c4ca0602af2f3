//! What `chela status` shows (channels, live runs, queue depths, undelivered replies, dead
//! letters), read from the store alone or from a running gateway (the RPC's `status`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::lane::Lanes;
use crate::store::{Store, StoreError};

/// The cursor-name suffix of a channel's count of undecodable updates it skipped.
const UNDECODABLE: &str = ":undecodable";

/// How many pending turns and dead letters are listed one by one.
const LISTED: usize = 20;

/// One queued turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLine {
    /// Its durable seq (its run will be `run-<seq>` unless it joins another run).
    pub seq: u64,
    /// Its session.
    pub session: String,
}

/// One reply that could not be delivered in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// Outbox id.
    pub id: u64,
    /// Its session.
    pub session: String,
    /// The first 60 characters of its text.
    pub preview: String,
}

/// One node of a cluster sharing the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLine {
    /// Its id.
    pub id: String,
    /// The session partitions it holds.
    pub partitions: Vec<u32>,
    /// The intakes it runs (`intake:telegram`).
    pub intakes: Vec<String>,
    /// How long ago its last heartbeat was, in ms (by this machine's clock).
    pub last_seen_ago_ms: u64,
    /// The chela version it runs (empty: a node from before versions were recorded).
    #[serde(default)]
    pub version: String,
    /// The cluster protocol it speaks (0: a node from before it was recorded).
    #[serde(default)]
    pub protocol: u32,
    /// Whether it is up: it holds its node lock (its database session lives). A node that
    /// is not holds nothing: the others take its sessions over (at once once it has been
    /// down for a second). A report from before this was recorded says up.
    #[serde(default = "up")]
    pub connected: bool,
    /// The sessions with a run going on there (at its last heartbeat; this node's own, at
    /// the time of the report).
    #[serde(default)]
    pub runs: Vec<String>,
}

impl NodeLine {
    /// The line of `node`, its heartbeat's age measured at `now_ms`.
    fn of(node: crate::store::NodeInfo, now_ms: u64) -> NodeLine {
        NodeLine {
            last_seen_ago_ms: now_ms.saturating_sub(node.last_seen_ms),
            id: node.id,
            partitions: node.partitions,
            intakes: node.intakes,
            version: node.version.version,
            protocol: node.version.protocol,
            connected: node.connected,
            runs: node.runs,
        }
    }
}

/// Serde's default of [`NodeLine::connected`].
fn up() -> bool {
    true
}

/// A node's lines in `chela status`: its health, heartbeat, leases and running sessions.
fn render_node(out: &mut String, node: &NodeLine) {
    let health = match node.connected {
        true => "up",
        false => "down (its database session ended; its sessions go to the others)",
    };
    let _ = write!(
        out,
        "  {} {health}: last heartbeat {:.1} s ago, {} partitions",
        node.id,
        node.last_seen_ago_ms as f64 / 1000.0,
        node.partitions.len()
    );
    if !node.partitions.is_empty() {
        let _ = write!(out, " ({})", ranges(&node.partitions));
    }
    for intake in &node.intakes {
        let _ = write!(out, ", {intake}");
    }
    out.push('\n');
    if !node.runs.is_empty() {
        let _ = writeln!(
            out,
            "    running {}: {}",
            node.runs.len(),
            node.runs.join(", ")
        );
    }
}

/// What the nodes run, one line per version: `  chela 0.1.0 (cluster protocol 1): a, b`.
fn versions(nodes: &[NodeLine]) -> String {
    let mut by_version: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for node in nodes {
        let version = crate::store::NodeVersion {
            version: node.version.clone(),
            protocol: node.protocol,
        };
        by_version
            .entry(version.to_string())
            .or_default()
            .push(&node.id);
    }
    let mut out = String::from("node versions:\n");
    for (version, ids) in by_version {
        let _ = writeln!(out, "  {version}: {}", ids.join(", "));
    }
    out
}

/// Sorted partitions as ranges: `0-20, 40, 42-43`.
fn ranges(partitions: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = partitions.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        out.push(match first == last {
            true => first.to_string(),
            false => format!("{first}-{last}"),
        });
    }
    out.join(", ")
}

/// The scheduled jobs of `store`, soonest first, one line each.
fn job_lines(store: &Store) -> Result<Vec<String>, StoreError> {
    let now_ms = crate::domain::message::now_ms();
    let mut jobs = store.cron_jobs()?;
    jobs.sort_by_key(|job| job.next_ms.unwrap_or(u64::MAX));
    Ok(jobs
        .iter()
        .map(|job| crate::cron::jobs::describe(job, now_ms))
        .collect())
}

/// A snapshot of the gateway's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// The store folder.
    pub store: String,
    /// Channel names (running ones when read from a gateway; configured ones otherwise).
    pub channels: Vec<String>,
    /// Whether this was read from a running gateway.
    pub live: bool,
    /// Sessions in the store.
    pub sessions: usize,
    /// Sessions with a run in progress (empty when not read from a gateway).
    pub live_runs: Vec<String>,
    /// Pending turns per session (queue depths), by session key.
    pub queues: BTreeMap<String, usize>,
    /// Pending turns in all.
    pub pending_total: usize,
    /// The oldest pending turns (at most 20).
    pub pending: Vec<PendingLine>,
    /// Final replies recorded but not yet delivered.
    pub undelivered: usize,
    /// Dead letters in all.
    pub dead_total: usize,
    /// The dead letters (at most 20).
    pub dead_letters: Vec<DeadLetter>,
    /// Platform updates skipped because they could not be decoded, by channel account
    /// (`telegram:default`).
    #[serde(default)]
    pub skipped_updates: BTreeMap<String, i64>,
    /// The nodes sharing the store (`[cluster]`), by id; empty otherwise.
    #[serde(default)]
    pub nodes: Vec<NodeLine>,
    /// The scheduled jobs, soonest first, one line each (id, schedule, next run, session).
    #[serde(default)]
    pub jobs: Vec<String>,
    /// The MCP servers (`[mcp.servers]`) of a running gateway.
    #[serde(default)]
    pub mcp: Vec<McpLine>,
}

/// One MCP server of a running gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpLine {
    /// Its name.
    pub name: String,
    /// `stdio: <command>` or `http: <url>`.
    pub transport: String,
    /// `starting`, `ready`, or `unavailable: <why>`.
    pub state: String,
    /// Its tools as the model sees them (`NAME__tool`).
    pub tools: Vec<String>,
    /// How often it was started again.
    pub restarts: u32,
}

impl McpLine {
    /// The line of `server`.
    pub fn of(server: crate::mcp::ServerStatus) -> McpLine {
        McpLine {
            state: match server.state {
                crate::mcp::ServerState::Starting => "starting".to_owned(),
                crate::mcp::ServerState::Ready => "ready".to_owned(),
                crate::mcp::ServerState::Unavailable(why) => format!("unavailable: {why}"),
            },
            tools: server.tools.into_iter().map(|t| t.exposed).collect(),
            name: server.name,
            transport: server.transport,
            restarts: server.restarts,
        }
    }
}

impl StatusReport {
    /// Reads the store; `channels` are the names to show.
    pub fn from_store(
        store: &Store,
        store_at: &str,
        channels: Vec<String>,
    ) -> Result<StatusReport, StoreError> {
        let pending = store.all_pending()?;
        let mut queues = BTreeMap::new();
        for (_, turn) in &pending {
            *queues.entry(turn.session_key.clone()).or_insert(0) += 1;
        }
        let dead = store.dead_letters()?;
        Ok(StatusReport {
            store: format!("{store_at} ({})", store.engine()),
            channels,
            live: false,
            sessions: store.list_sessions()?.len(),
            live_runs: Vec::new(),
            queues,
            pending_total: pending.len(),
            pending: pending
                .iter()
                .take(LISTED)
                .map(|(seq, turn)| PendingLine {
                    seq: *seq,
                    session: turn.session_key.clone(),
                })
                .collect(),
            undelivered: store.undelivered()?.len(),
            dead_total: dead.len(),
            dead_letters: dead
                .iter()
                .take(LISTED)
                .map(|entry| DeadLetter {
                    id: entry.id,
                    session: entry.session_key.clone(),
                    preview: entry.text.chars().take(60).collect(),
                })
                .collect(),
            skipped_updates: store
                .cursors_ending(UNDECODABLE)?
                .into_iter()
                .map(|(name, n)| (name.trim_end_matches(UNDECODABLE).to_owned(), n))
                .collect(),
            nodes: {
                let now_ms = crate::domain::message::now_ms();
                let nodes = store.cluster_nodes()?;
                nodes.into_iter().map(|n| NodeLine::of(n, now_ms)).collect()
            },
            jobs: job_lines(store)?,
            mcp: Vec::new(),
        })
    }

    /// Reads a running gateway: its store (described as `store_at`), its `channels` and
    /// the runs going on in its `lanes`; on a cluster (`node`: this node's id) the runs of
    /// every node that is up too.
    pub async fn running(
        store: &Store,
        store_at: &str,
        channels: Vec<String>,
        lanes: &Lanes,
        node: Option<&str>,
    ) -> Result<StatusReport, StoreError> {
        let mut report = Self::from_store(store, store_at, channels)?;
        report.live = true;
        let here = lanes.running_sessions().await;
        let mut all = here.clone();
        for line in &mut report.nodes {
            if Some(line.id.as_str()) == node {
                line.runs.clone_from(&here);
            }
            if line.connected {
                all.extend(line.runs.iter().cloned());
            }
        }
        all.sort();
        all.dedup();
        report.live_runs = all;
        Ok(report)
    }

    /// The text `chela status` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "store: {}", self.store);
        let _ = writeln!(out, "channels: {}", self.channels.join(", "));
        if self.live {
            let _ = writeln!(out, "gateway: running");
            let _ = writeln!(out, "live runs: {}", self.live_runs.len());
            for key in &self.live_runs {
                let _ = writeln!(out, "  {key}");
            }
        }
        let _ = writeln!(out, "sessions: {}", self.sessions);
        let _ = writeln!(out, "pending turns: {}", self.pending_total);
        for line in &self.pending {
            let _ = writeln!(out, "  #{} {}", line.seq, line.session);
        }
        if !self.queues.is_empty() {
            let _ = writeln!(out, "queue depths:");
            for (key, depth) in &self.queues {
                let _ = writeln!(out, "  {key}: {depth}");
            }
        }
        let _ = writeln!(out, "undelivered replies: {}", self.undelivered);
        let _ = writeln!(out, "dead letters: {}", self.dead_total);
        for entry in &self.dead_letters {
            let _ = writeln!(out, "  #{} {} {:?}", entry.id, entry.session, entry.preview);
        }
        if !self.skipped_updates.is_empty() {
            let _ = writeln!(out, "undecodable updates skipped:");
            for (account, n) in &self.skipped_updates {
                let _ = writeln!(out, "  {account}: {n}");
            }
        }
        if !self.jobs.is_empty() {
            let _ = writeln!(out, "scheduled jobs: {}", self.jobs.len());
            for job in &self.jobs {
                let _ = writeln!(out, "  {job}");
            }
        }
        if !self.mcp.is_empty() {
            let _ = writeln!(out, "mcp servers: {}", self.mcp.len());
        }
        for server in &self.mcp {
            let _ = writeln!(
                out,
                "  {} ({}): {}, {} tools, restarted {} times",
                server.name,
                server.transport,
                server.state,
                server.tools.len(),
                server.restarts
            );
        }
        if !self.nodes.is_empty() {
            out.push_str(&versions(&self.nodes));
            let _ = writeln!(out, "nodes: {}", self.nodes.len());
        }
        for node in &self.nodes {
            render_node(&mut out, node);
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn render_lists_live_runs_and_queue_depths() {
        let report = StatusReport {
            store: "/d".into(),
            channels: vec!["rpc".into(), "terminal".into()],
            live: true,
            sessions: 2,
            live_runs: vec!["agent:main:main".into()],
            queues: BTreeMap::from([("agent:main:main".to_owned(), 2)]),
            pending_total: 2,
            pending: vec![PendingLine {
                seq: 7,
                session: "agent:main:main".into(),
            }],
            undelivered: 0,
            dead_total: 0,
            dead_letters: Vec::new(),
            skipped_updates: BTreeMap::new(),
            nodes: Vec::new(),
            jobs: vec![
                "soon  at 2030-01-01T00:00:00Z  next 2030-01-01T00:00:00Z (in 5m)  k  \"hi\""
                    .into(),
            ],
            mcp: vec![McpLine {
                name: "files".into(),
                transport: "stdio: npx".into(),
                state: "unavailable: it exited".into(),
                tools: vec!["files__read".into()],
                restarts: 2,
            }],
        };
        let text = report.render();
        assert!(
            text.contains("mcp servers: 1\n  files (stdio: npx): unavailable: it exited, 1 tools, restarted 2 times\n"),
            "{text}"
        );
        assert!(!text.contains("nodes:"), "{text}");
        assert!(text.contains("scheduled jobs: 1\n  soon  at "), "{text}");
        assert!(text.contains("channels: rpc, terminal\n"), "{text}");
        assert!(text.contains("live runs: 1\n  agent:main:main\n"), "{text}");
        assert!(
            text.contains("pending turns: 2\n  #7 agent:main:main\n"),
            "{text}"
        );
        assert!(
            text.contains("queue depths:\n  agent:main:main: 2\n"),
            "{text}"
        );
        let back: StatusReport =
            serde_json::from_value(serde_json::to_value(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn render_lists_the_nodes_with_their_health_partitions_intakes_and_runs() {
        let node = |id: &str, partitions: Vec<u32>, intakes: Vec<String>| {
            let info = crate::store::NodeInfo {
                id: id.into(),
                started_ms: 0,
                last_seen_ms: 9_000,
                partitions,
                intakes,
                layouts: Vec::new(),
                connected: true,
                runs: Vec::new(),
                version: crate::store::NodeVersion {
                    version: "0.1.0".into(),
                    protocol: 1,
                },
            };
            NodeLine::of(info, 10_500)
        };
        let report = StatusReport {
            store: "postgres".into(),
            channels: Vec::new(),
            live: false,
            sessions: 0,
            live_runs: Vec::new(),
            queues: BTreeMap::new(),
            pending_total: 0,
            pending: Vec::new(),
            undelivered: 0,
            dead_total: 0,
            dead_letters: Vec::new(),
            skipped_updates: BTreeMap::new(),
            nodes: vec![
                node(
                    "a",
                    (0..=20).chain([40, 42, 43]).collect(),
                    vec!["intake:telegram".into()],
                ),
                NodeLine {
                    runs: vec!["k1".into(), "k2".into()],
                    ..node("b", vec![5], Vec::new())
                },
                NodeLine {
                    connected: false,
                    ..node("c", Vec::new(), Vec::new())
                },
            ],
            jobs: Vec::new(),
            mcp: Vec::new(),
        };
        let text = report.render();
        assert!(
            text.ends_with(
                "nodes: 3\n  a up: last heartbeat 1.5 s ago, 24 partitions (0-20, 40, 42-43), \
                 intake:telegram\n  b up: last heartbeat 1.5 s ago, 1 partitions (5)\n    \
                 running 2: k1, k2\n  c down (its database session ended; its sessions go \
                 to the others): last heartbeat 1.5 s ago, 0 partitions\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "node versions:\n  chela 0.1.0 (cluster protocol 1): a, b, c\nnodes: 3\n"
            ),
            "{text}"
        );
    }
}
