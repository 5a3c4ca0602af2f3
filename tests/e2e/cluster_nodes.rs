//! End-to-end, two gateways on one PostgreSQL (`[cluster] enabled`), each with its own
//! Telegram webhook listener: what acts across nodes. The RPC's `abort` on one node stops a
//! run on the other; `/approve` typed in a conversation one node runs answers an exec
//! approval the other asked; a mention reaching one node sees the group context the other
//! kept; and a node whose cluster protocol differs from a live node's refuses to start.
//! Needs `CHELA_TEST_PG_URL` (scripts/test.sh).

use crate::common;

use std::time::Duration;

use chela_testkit::ChatSpec;
use common::Chat;
use common::cluster::{SECRET, execute, free_port, node_command, post, query, schema_of, update};
use common::pg::fresh_store_url;
use common::telegram::{TgConfig, TgSetup};
use serde_json::{Value, json};

/// The session key of the private chat with user `id`.
fn dm_key(id: i64) -> String {
    format!("agent:main:telegram:direct:{id}")
}

/// Two nodes, `n0` and `n1`, with the partitions spread over both.
struct Nodes {
    s: TgSetup,
    url: String,
    schema: String,
    listens: Vec<String>,
    nodes: Vec<Chat>,
}

impl Nodes {
    /// Starts two nodes with `tables` (after `[cluster]`) in their config.
    async fn start(tables: &str) -> Nodes {
        let url = fresh_store_url().await;
        let schema = schema_of(&url);
        let tables = format!("[cluster]\nenabled = true\nlease_s = 5\n{tables}");
        let s = TgSetup::with(TgConfig {
            telegram: "dm_policy = \"open\"\ngroup_policy = \"open\"",
            tables: &tables,
            ..TgConfig::default()
        })
        .await;
        let listens: Vec<String> = (0..2)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let mut nodes = Nodes {
            s,
            url,
            schema,
            listens,
            nodes: Vec::new(),
        };
        for i in 0..2 {
            let node = nodes.node(i);
            nodes.nodes.push(node);
        }
        nodes.wait_spread().await;
        nodes
    }

    /// Starts node `n{i}`.
    fn node(&self, i: usize) -> Chat {
        let base = std::fs::read_to_string(self.s.setup.config()).unwrap();
        let config = base
            .replace(
                "dm_policy = \"open\"",
                &format!(
                    "dm_policy = \"open\"\nwebhook_url = \"http://{0}/tg/hook\"\n\
                     webhook_listen = \"{0}\"\nwebhook_secret = \"{SECRET}\"",
                    self.listens[i]
                ),
            )
            .replace(
                "lease_s = 5\n",
                &format!("lease_s = 5\nnode_id = \"n{i}\"\n"),
            );
        let mut cmd = node_command(&self.s.setup, &config, &self.url, i, "gateway");
        cmd.env("RUST_LOG", "warn");
        Chat::spawn(cmd)
    }

    /// Waits until the two nodes hold all the partitions between them.
    async fn wait_spread(&self) {
        let sql = format!(
            "SELECT node, count(*) FROM {}.leases WHERE node IS NOT NULL \
             AND expires > now() GROUP BY node",
            self.schema
        );
        for _ in 0..300 {
            let held = query(&sql).await;
            let total: i64 = held.iter().map(|r| r.get::<_, i64>(1)).sum();
            if held.len() == 2 && total == 64 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the partitions were not spread over the two nodes");
    }

    /// The node holding the partition of session `key`.
    async fn owner(&self, key: &str) -> String {
        let partition = chela::store::partition_of(key) as i32;
        let sql = format!(
            "SELECT node FROM {}.leases WHERE partition = {partition}",
            self.schema
        );
        query(&sql).await[0].get(0)
    }

    /// The first private chat from `from` on whose session node `node` runs.
    async fn chat_on(&self, node: &str, from: i64) -> i64 {
        for chat in from..from + 200 {
            if self.owner(&dm_key(chat)).await == node {
                self.s.tg.add_chat(ChatSpec::private(chat));
                return chat;
            }
        }
        panic!("no chat on {node}");
    }

    /// Waits until some text the bot sent in `chat` satisfies `want`.
    async fn wait_text(&self, chat: i64, want: impl Fn(&str) -> bool) -> String {
        let found = self
            .s
            .tg
            .wait_for(
                |_| self.s.texts(chat).iter().any(|t| want(t)),
                Duration::from_secs(30),
            )
            .await;
        let texts = self.s.texts(chat);
        assert!(found, "chat {chat}: {texts:?}");
        texts.into_iter().find(|t| want(t)).unwrap()
    }

    /// Stops the nodes; their stderr.
    async fn stop(self) -> String {
        let mut stderr = String::new();
        for node in self.nodes {
            node.signal("TERM");
            stderr.push_str(&node.finish().await.stderr);
        }
        stderr
    }
}

/// Calls `method` with `params` on the RPC of the gateway whose discovery file is
/// `discovery`; the answer's result (or error).
async fn rpc(discovery: std::path::PathBuf, method: &str, params: Value) -> Value {
    use futures_util::{SinkExt, StreamExt};
    let found: Value = serde_json::from_str(&std::fs::read_to_string(discovery).unwrap()).unwrap();
    let url = format!(
        "ws://{}/ws?token={}",
        found["address"].as_str().unwrap(),
        found["token"].as_str().unwrap()
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let request = json!({"id": 1, "method": method, "params": params}).to_string();
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(request))
        .await
        .unwrap();
    while let Some(Ok(message)) = socket.next().await {
        if let Ok(text) = message.to_text()
            && let Ok(frame) = serde_json::from_str::<Value>(text)
            && frame["id"] == 1
        {
            return frame;
        }
    }
    panic!("no answer to {method}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_nodes_status_lists_the_run_and_its_rpc_abort_stops_it_where_it_runs() {
    let nodes = Nodes::start("").await;
    let chat = nodes.chat_on("n0", 1).await;
    post(
        &nodes.listens[0],
        &update(chat, chat, 1, "slow 300 200", false),
    )
    .await;
    nodes.wait_text(chat, |t| t.contains("tick 1 ")).await;
    // n1's status shows the run going on at n0 (published with n0's next heartbeat).
    let data1 = nodes.s.setup.path("data1.rpc");
    let key = dm_key(chat);
    let mut status = Value::Null;
    for _ in 0..100 {
        status = rpc(data1.clone(), "status", json!({})).await["result"].clone();
        let n0 = (status["nodes"].as_array().into_iter().flatten()).find(|n| n["id"] == "n0");
        if n0.is_some_and(|n| n["connected"] == true && n["runs"] == json!([key.clone()])) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        status["liveRuns"]
            .as_array()
            .is_some_and(|r| r.contains(&json!(key))),
        "n1 does not list n0's run: {status}"
    );
    // Asked through n1, which does not run the session.
    let answer = rpc(data1, "abort", json!({"session": dm_key(chat)})).await;
    let result = &answer["result"];
    assert_eq!(result["stoppedRun"], true, "{answer}");
    assert_eq!(result["node"], "n0", "{answer}");
    // The stop reached the run: its reply ends marked as stopped (the whole answer would
    // take a minute), without the last tick.
    let stopped = nodes.wait_text(chat, |t| t.contains("[stopped]")).await;
    let stderr = nodes.stop().await;
    assert!(!stopped.contains("tick 200"), "{stopped}\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_in_a_conversation_of_another_node_answers_the_approval() {
    // The owner's private chat and the asking chat run on different nodes.
    let owner_first = 500;
    let tables = format!(
        "[tools]\nexec_approvals = \"ask\"\napproval_timeout_s = 120\n\n\
         [commands]\nowner_allow_from = [{}]\n",
        (owner_first..owner_first + 200)
            .map(|id| format!("\"telegram:{id}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let nodes = Nodes::start(&tables).await;
    let asker = nodes.chat_on("n0", 1).await;
    let owner = nodes.chat_on("n1", owner_first).await;
    let command = "echo crossed";
    let ask = format!("tool exec {{\"command\": \"{command}\"}}");
    post(&nodes.listens[0], &update(asker, asker, 1, &ask, false)).await;
    let asked = nodes
        .wait_text(asker, |t| t.contains("Approval needed to run"))
        .await;
    let id = asked
        .split("/approve ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();

    // The owner lists the waiting approvals, then answers, through either node.
    post(
        &nodes.listens[0],
        &update(owner, owner, 1, "/approve", false),
    )
    .await;
    let listed = nodes
        .wait_text(owner, |t| {
            t.starts_with("Waiting for approval") || t.starts_with("No ")
        })
        .await;
    let answer = format!("/approve {id} allow-once");
    post(&nodes.listens[0], &update(owner, owner, 2, &answer, false)).await;
    let answered = nodes
        .wait_text(owner, |t| t.starts_with("Allowed") || t.contains(" is no"))
        .await;
    // The whole answer, not a preview of its first words.
    let ran = nodes
        .wait_text(asker, |t| t.starts_with("done: crossed"))
        .await;
    let again = format!("/approve {id} deny");
    post(&nodes.listens[1], &update(owner, owner, 3, &again, false)).await;
    let late = nodes
        .wait_text(owner, |t| t.starts_with("No approval"))
        .await;
    nodes.stop().await;
    assert_eq!(
        listed,
        format!("Waiting for approval:\n{id} ({}): {command}", dm_key(asker))
    );
    // The answer names the node that asked (and alone acted on) the approval.
    assert_eq!(answered, format!("Allowed once on node n0: {command}"));
    assert!(ran.starts_with("done: crossed"), "{ran}");
    assert!(
        late.contains(&format!("No approval {id} is waiting")),
        "{late}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_through_another_node_sees_the_group_context() {
    const GROUP: i64 = -9001;
    let nodes = Nodes::start("").await;
    nodes.s.tg.add_chat(ChatSpec::group(GROUP, "Team"));
    // Unmentioned: kept as context by n0; the mention after it reaches n1.
    let kept = update(GROUP, 7, 1, "the door is blue", false);
    post(&nodes.listens[0], &kept).await;
    let mention = update(GROUP, 8, 2, "what colour is the door?", true);
    post(&nodes.listens[1], &mention).await;
    // (Previews come first: the whole reply ends with the question.)
    let reply = nodes.wait_text(GROUP, |t| t.ends_with("door?")).await;
    let stderr = nodes.stop().await;
    assert!(
        reply.contains("[Recent group messages]") && reply.contains("U7: the door is blue"),
        "{reply}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_cluster_protocol_refuses_to_start() {
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = TgSetup::with(TgConfig {
        tables: "[cluster]\nenabled = true\nlease_s = 5\n",
        ..TgConfig::default()
    })
    .await;
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let command = |i: usize, sub: &str| {
        let config = base.replace(
            "lease_s = 5\n",
            &format!("lease_s = 5\nnode_id = \"n{i}\"\n"),
        );
        node_command(&s.setup, &config, &url, i, sub)
    };
    let n0 = Chat::spawn(command(0, "gateway"));
    let sql = format!("SELECT version FROM {schema}.nodes WHERE id = 'n0'");
    for _ in 0..300 {
        if !query(&sql).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // n0 as a newer chela would record itself (this must work: checked, not ignored).
    let updated = execute(&format!(
        "UPDATE {schema}.nodes SET version = '9.9.9', protocol = 99 WHERE id = 'n0'"
    ))
    .await;
    assert_eq!(updated, 1);
    let n1 = common::run_to_end(command(1, "gateway")).await;
    let stderr = String::from_utf8_lossy(&n1.stderr);
    let status = common::run_to_end(command(2, "status")).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    n0.signal("TERM");
    n0.finish().await;
    assert_eq!(n1.status.code(), Some(2), "{stderr}");
    let ours = format!("chela {} (cluster protocol ", env!("CARGO_PKG_VERSION"));
    assert!(
        stderr.contains("node n0 ")
            && stderr.contains("chela 9.9.9 (cluster protocol 99)")
            && stderr.contains(&ours),
        "{stderr}"
    );
    assert!(
        status.contains("node versions:\n  chela 9.9.9 (cluster protocol 99): n0\n"),
        "{status}"
    );
}
