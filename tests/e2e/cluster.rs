//! End-to-end, several gateways on one PostgreSQL (`[cluster] enabled`): three `chela
//! gateway` processes with the Telegram webhook behind a round-robin proxy share the chats;
//! one is killed with kill -9 in the middle and started again later. Every message gets
//! exactly one reply, in order per chat. Needs `CHELA_TEST_PG_URL` (scripts/test.sh).
//!
//! The fake Telegram does not push webhooks: the test plays Telegram's webhook sender,
//! posting each chat's updates one after the other to the proxy and retrying until one is
//! acknowledged with 200, as Telegram does.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chela_testkit::ChatSpec;
use common::Chat;
use common::cluster::{
    SECRET, block_on, db_now_ms, first_lease_end_ms, free_port, node_command, post, post_once,
    proxy, query, schema_of, start_node, status_command, update,
};
use common::pg::fresh_store_url;
use common::telegram::{TgConfig, TgSetup};
use tokio::net::TcpListener;

const NODES: usize = 3;
const CHATS: i64 = 50;
const MESSAGES: i64 = 20;
/// The text of message `n` in `chat`.
fn text(chat: i64, n: i64) -> String {
    format!("m{chat}-{n}")
}

/// Telegram's side: each chat's updates in order, each retried until acknowledged.
async fn send_chat(proxy: String, chat: i64) {
    for n in 1..=MESSAGES {
        let body = update(chat, chat, n, &text(chat, n), false);
        // Bounded (about 2 minutes, longer than any failover here) so a node that never
        // takes updates fails the test instead of hanging it.
        let mut tries = 0;
        while post_once(&proxy, &body).await != 200 {
            tries += 1;
            assert!(tries < 600, "the proxy at {proxy} never took {body}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether chats `1..=chats` each hold the replies to their messages `1..=n`, whatever else
/// they hold (a count would take a preview orphaned by the kill for a reply).
fn replied(s: &TgSetup, chats: i64, n: i64) -> bool {
    (1..=chats).all(|chat| {
        let texts: Vec<String> = s
            .texts(chat)
            .iter()
            .map(|t| t.trim_end().to_owned())
            .collect();
        (1..=n).all(|m| texts.contains(&format!("ok: {}", text(chat, m))))
    })
}

/// Checks that chats `1..=chats` got exactly the replies to their `messages` messages, in
/// order; returns how many replies were repeated. `at_kill[c]` is how many replies chat `c`
/// had when a node was killed.
fn check_replies(s: &TgSetup, chats: i64, messages: i64, at_kill: &[usize], stderr: &str) -> usize {
    let want = |chat: i64| -> Vec<String> {
        (1..=messages)
            .map(|n| format!("ok: {}", text(chat, n)))
            .collect()
    };
    // Every message answered, in order. The one exception allowed: a reply whose
    // sendMessage had reached Telegram when its node was killed, before the node could note
    // it (reply journal): the node taking over cannot know it went out and sends it again,
    // right after itself. Telegram has no idempotency key; a single node restarted after a
    // kill -9 has the same window. So at most one repeat per chat, of the reply that was in
    // flight at the kill.
    // The same window cuts a streamed reply: a preview whose sendMessage reached Telegram
    // before its node noted it stays as it was (a prefix of the reply), and the node taking
    // over sends the whole reply below it. At most one such message per chat, at the kill.
    let mut repeats = 0;
    for chat in 1..=chats {
        let mut texts: Vec<String> = s
            .texts(chat)
            .iter()
            .map(|t| t.trim_end().to_owned())
            .collect();
        let in_flight = at_kill[chat as usize];
        let orphan = (0..texts.len().saturating_sub(1)).find(|i| {
            texts[i + 1].starts_with(&texts[*i])
                && texts[i + 1] != texts[*i]
                && i.abs_diff(in_flight) <= 1
        });
        if let Some(i) = orphan {
            texts.remove(i);
            repeats += 1;
        }
        let mut unique = texts.clone();
        unique.dedup();
        assert_eq!(
            unique,
            want(chat),
            "chat {chat} (in flight at the kill: {in_flight}): {:?}\ncluster lines of the nodes:\n{}",
            s.tg.sent(chat)
                .iter()
                .map(|m| (m.message_id, m.text.as_str(), m.edits))
                .collect::<Vec<_>>(),
            cluster_lines(stderr)
        );
        let repeated: Vec<usize> = (1..texts.len())
            .filter(|i| texts[*i] == texts[i - 1])
            .collect();
        let sent = || {
            s.tg.sent(chat)
                .iter()
                .map(|m| (m.message_id, m.text.clone(), m.edits))
                .collect::<Vec<_>>()
        };
        assert!(
            repeated.len() + usize::from(orphan.is_some()) <= 1,
            "chat {chat}: {:?}\ncluster lines of the nodes:\n{}",
            sent(),
            cluster_lines(stderr)
        );
        for i in repeated {
            repeats += 1;
            // texts[i] repeats texts[i - 1], the reply sent at index i - 1.
            assert!(
                (i - 1).abs_diff(in_flight) <= 1,
                "chat {chat}: reply {i} repeated, but {in_flight} were in the chat at the kill: {:?}\n\
                 cluster lines of the nodes:\n{}",
                sent(),
                cluster_lines(stderr)
            );
        }
    }
    repeats
}

/// The nodes' log lines about leases and partitions (what explains a repeat), at most 60.
fn cluster_lines(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("cluster:") || l.contains("journal"))
        .collect();
    lines[lines.len().saturating_sub(150)..].join("\n")
}

/// Who holds the unexpired leases: (node, partitions) by node.
async fn holders(schema: &str) -> Vec<(String, i64)> {
    let sql = format!(
        "SELECT node, count(*) FROM {schema}.leases WHERE node IS NOT NULL \
         AND expires > now() GROUP BY node ORDER BY node"
    );
    // Not migrated yet: nobody holds anything.
    query(&sql)
        .await
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_answer_every_message_once_in_order_across_a_kill_9() {
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "dm_policy = \"open\"",
        // The default lease (10 s): a shorter one lapses when a loaded test machine starves
        // a node's renewals, which this test is not about (tests/e2e/cluster_lapse.rs is).
        tables: "[cluster]\nenabled = true\n",
        ..TgConfig::default()
    })
    .await;
    for chat in 1..=CHATS {
        s.tg.add_chat(ChatSpec::private(chat));
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap().to_string();
    let listens: Vec<String> = (0..NODES)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    proxy(listener, listens.clone());
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let start = |i: usize| {
        let config = base
            .replace(
                "dm_policy = \"open\"",
                &format!(
                    "dm_policy = \"open\"\nwebhook_url = \"http://{front}/tg/hook\"\n\
                     webhook_listen = \"{}\"\nwebhook_secret = \"{SECRET}\"",
                    listens[i]
                ),
            )
            .replace(
                "enabled = true",
                &format!("enabled = true\nnode_id = \"node{i}\""),
            );
        let mut cmd = node_command(&s.setup, &config, &url, i, "gateway");
        cmd.env("RUST_LOG", "warn,chela::cluster=info,chela::lane=info");
        Chat::spawn(cmd)
    };
    let mut nodes: Vec<Option<Chat>> = (0..NODES).map(|i| Some(start(i))).collect();

    // The partitions are spread over the three nodes before the load starts.
    let spread =
        s.tg.wait_for(
            |_| {
                let schema = schema.clone();
                let held = block_on(async move { holders(&schema).await });
                held.len() == NODES && held.iter().map(|h| h.1).sum::<i64>() == 64
            },
            Duration::from_secs(60),
        )
        .await;
    assert!(
        spread,
        "partitions not spread: {:?}",
        holders(&schema).await
    );

    let senders: Vec<_> = (1..=CHATS)
        .map(|chat| tokio::spawn(send_chat(front.clone(), chat)))
        .collect();
    let total = (CHATS * MESSAGES) as usize;
    let replies = |s: &TgSetup| (1..=CHATS).map(|c| s.texts(c).len()).sum::<usize>();
    // kill -9 one node in the middle of the load.
    assert!(
        s.tg.wait_for(
            |t| {
                let _ = t;
                replies(&s) >= total / 3
            },
            Duration::from_secs(300)
        )
        .await
    );
    // Read before the kill (a renewal meanwhile only moves the end later): the survivors
    // may take the leases over within moments of it.
    let leases_end = first_lease_end_ms(&schema, "node1")
        .await
        .expect("node1 held leases");
    nodes[1].take().unwrap().kill().await;
    let killed = std::time::Instant::now();
    // What each chat had at the kill: a reply repeated later must be the one in flight then.
    let at_kill: Vec<usize> = (0..=CHATS).map(|c| s.texts(c).len()).collect();
    // The killed node stays dead until the survivors took its sessions over: every chat
    // still waiting at the kill gets another reply first (a takeover that never happened
    // would otherwise be covered up by the node coming back).
    let waiting: Vec<i64> = (1..=CHATS)
        .filter(|&c| at_kill[c as usize] < MESSAGES as usize)
        .collect();
    let taken_over =
        s.tg.wait_for(
            |_| {
                waiting
                    .iter()
                    .all(|&c| s.texts(c).len() > at_kill[c as usize])
            },
            Duration::from_secs(300),
        )
        .await;
    let (failover, answered_ms) = (killed.elapsed(), db_now_ms().await);
    assert!(
        taken_over,
        "chats waiting at the kill were not answered while the node was dead: {:?}",
        waiting
            .iter()
            .filter(|&&c| s.texts(c).len() <= at_kill[c as usize])
            .collect::<Vec<_>>()
    );
    // The failover's bound, as an order of events: every waiting chat was answered again
    // before the first of the dead node's leases would have run out, so the survivors
    // noticed it by its node lock (its PostgreSQL session ended), not by lease expiry.
    assert!(
        answered_ms < leases_end,
        "the waiting chats were answered {} ms after node1's first lease ran out: the \
         takeover waited for the leases (after {failover:?})",
        answered_ms - leases_end
    );
    eprintln!(
        "three nodes: every chat waiting at the kill answered again {failover:?} after it \
         ({} ms before node1's first lease would have run out)",
        leases_end - answered_ms
    );
    assert!(
        s.tg.wait_for(|_| replies(&s) >= 2 * total / 3, Duration::from_secs(300))
            .await
    );
    nodes[1] = Some(start(1));
    for sender in senders {
        sender.await.unwrap();
    }
    let done =
        s.tg.wait_for(|_| replied(&s, CHATS, MESSAGES), Duration::from_secs(300))
            .await;
    // A second answer to any message would be out once the nodes stopped: a graceful stop
    // delivers what was recorded.
    let mut stderr = String::new();
    for (i, node) in nodes.into_iter().enumerate() {
        let Some(node) = node else { continue };
        node.signal("TERM");
        let finished = node.finish().await;
        for line in finished.stderr.lines() {
            stderr.push_str(&format!("[node {i}] {line}\n"));
        }
    }
    assert!(done, "not every message was answered; stderr: {stderr}");
    let repeats = check_replies(&s, CHATS, MESSAGES, &at_kill, &stderr);
    eprintln!("replies repeated after the kill -9 (sent, not yet journaled): {repeats}");
}

/// The node holding the unexpired Telegram intake lease, if any.
async fn intake_holder(schema: &str) -> Option<String> {
    let sql = format!(
        "SELECT node FROM {schema}.intake_leases \
         WHERE name = 'intake:telegram' AND node IS NOT NULL AND expires > now()"
    );
    // Not migrated yet: nobody holds it.
    query(&sql).await.first().map(|r| r.get(0))
}

/// Chats and messages per chat of the long-polling test.
const POLL_CHATS: i64 = 20;
const POLL_MESSAGES: i64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_long_polling_one_node_polls_and_another_takes_over_after_a_kill_9() {
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = TgSetup::with(TgConfig {
        mode: "followup",
        telegram: "dm_policy = \"open\"",
        // The default lease (10 s).
        tables: "[cluster]\nenabled = true\n",
        ..TgConfig::default()
    })
    .await;
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let start = |i: usize| {
        start_node(
            &s.setup,
            &base,
            &url,
            i,
            "warn,chela::gateway=info,chela::intake=info,chela::cluster=info,chela::delivery=info",
        )
    };
    let mut nodes: Vec<Option<Chat>> = (0..NODES).map(|i| Some(start(i))).collect();
    let send = |from: i64, to: i64| {
        for n in from..=to {
            for chat in 1..=POLL_CHATS {
                let (c, u) = common::telegram::dm(chat, &format!("U{chat}"));
                s.tg.user_sends(c, u, &text(chat, n));
            }
        }
    };
    let answered = |s: &TgSetup, n: i64| replied(s, POLL_CHATS, n);

    // Half the messages, answered while all three nodes run: one of them polls.
    send(1, POLL_MESSAGES / 2);
    let half = s.tg.wait_for(
        |_| answered(&s, POLL_MESSAGES / 2),
        Duration::from_secs(300),
    );
    assert!(half.await, "the first half was not answered");
    let pollers = s.tg.pollers();
    assert_eq!(
        pollers.conflicts, 0,
        "several nodes polled at once: {pollers:?}"
    );
    assert!(pollers.max_concurrent <= 1, "{pollers:?}");
    let holder = intake_holder(&schema)
        .await
        .expect("a node holds the intake");
    let i: usize = holder.trim_start_matches("node").parse().unwrap();
    // Every node is ready: the poller connected, the others on standby (not 503 forever).
    for n in 0..NODES {
        let (status, body) = readyz(&s.setup.path(&format!("data{n}.rpc"))).await;
        assert_eq!(status, 200, "node{n} (poller {holder}): {body}");
    }

    // kill -9 the poller; the other half is sent while it is gone.
    let leases_end = first_lease_end_ms(&schema, &holder)
        .await
        .expect("the poller's leases");
    nodes[i].take().unwrap().kill().await;
    let killed = std::time::Instant::now();
    let at_kill: Vec<usize> = (0..=POLL_CHATS).map(|c| s.texts(c).len()).collect();
    send(POLL_MESSAGES / 2 + 1, POLL_MESSAGES);
    let first = |s: &TgSetup| (1..=POLL_CHATS).any(|c| s.texts(c).len() > at_kill[c as usize]);
    assert!(s.tg.wait_for(|_| first(&s), Duration::from_secs(60)).await);
    let (failover, answered_ms) = (killed.elapsed(), db_now_ms().await);
    // The bound as an order of events: polling moved and a chat was answered before the
    // dead poller's first lease (its intake's or a partition's) would have run out.
    assert!(
        answered_ms < leases_end,
        "the first answer after the kill came {} ms after the poller's first lease ran out \
         (after {failover:?})",
        answered_ms - leases_end
    );
    let done =
        s.tg.wait_for(|_| answered(&s, POLL_MESSAGES), Duration::from_secs(300));
    let done = done.await;
    // A second answer to any message would be out once the nodes stopped (below).
    let new_holder = intake_holder(&schema).await;
    // `chela status` (beside the running nodes: a cluster shares the store) lists the nodes.
    let survivor = (0..NODES).find(|n| *n != i).unwrap();
    let status = common::run_to_end(status_command(&s.setup, &url, survivor)).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let mut stderr = String::new();
    for node in nodes.into_iter().flatten() {
        node.signal("TERM");
        stderr.push_str(&node.finish().await.stderr);
    }
    assert!(done, "not every message was answered; stderr: {stderr}");
    assert!(
        new_holder.as_ref().is_some_and(|h| *h != holder),
        "the intake did not move from {holder}: {new_holder:?}"
    );
    let holder_line = format!(
        "  {} up: last heartbeat",
        new_holder.clone().unwrap_or_default()
    );
    let listed = status.lines().find(|l| l.starts_with(&holder_line));
    assert!(
        listed.is_some_and(|l| l.ends_with(", intake:telegram")),
        "{status}"
    );
    assert!(status.contains(&format!("\nnodes: {NODES}\n")), "{status}");
    // The killed node is listed as down, holding nothing.
    assert!(
        status.contains(&format!("\n  {holder} down (its database session ended")),
        "{status}"
    );
    let repeats = check_replies(&s, POLL_CHATS, POLL_MESSAGES, &at_kill, &stderr);
    eprintln!(
        "long polling: {holder} killed; {new_holder:?} answered again after {failover:?}; \
         repeats {repeats}; pollers {:?}",
        s.tg.pollers()
    );
}

/// `GET /readyz` of the gateway whose discovery file is `discovery`: (status, body).
async fn readyz(discovery: &std::path::Path) -> (u16, String) {
    let found: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(discovery).unwrap()).unwrap();
    let address = found["address"].as_str().unwrap();
    let answer = reqwest::get(format!("http://{address}/readyz"))
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// Subscribes to the run events of the gateway whose discovery file is `discovery` (its
/// RPC's `events.subscribe`); the frames it pushes gather in the returned list.
async fn subscribe(discovery: std::path::PathBuf) -> Arc<std::sync::Mutex<Vec<serde_json::Value>>> {
    use futures_util::{SinkExt, StreamExt};
    let mut found = None;
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(&discovery) {
            found = Some(text);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let found: serde_json::Value = serde_json::from_str(&found.expect("discovery file")).unwrap();
    let url = format!(
        "ws://{}/ws?token={}",
        found["address"].as_str().unwrap(),
        found["token"].as_str().unwrap()
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            r#"{"id":1,"method":"events.subscribe"}"#.into(),
        ))
        .await
        .unwrap();
    let frames = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = frames.clone();
    tokio::spawn(async move {
        while let Some(Ok(message)) = socket.next().await {
            if let Ok(text) = message.to_text()
                && let Ok(frame) = serde_json::from_str(text)
            {
                into.lock().unwrap().push(frame);
            }
        }
    });
    frames
}

/// The `run` events of session `key` among `frames`: (status, text).
fn runs_of(frames: &[serde_json::Value], key: &str) -> Vec<(String, String)> {
    frames
        .iter()
        .filter(|f| f["event"] == "run" && f["session"] == key)
        .map(|f| {
            (
                f["status"].as_str().unwrap_or("").to_owned(),
                f["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `/stop` sent through a node that does not run the session reaches the run on the node
/// that does: the stream ends there, "Stopped." is answered, and a message sent right
/// behind it is answered after it (not dropped as queued). `events.subscribe` on either
/// node shows both runs, wherever they ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_sent_through_another_node_stops_the_run_where_it_runs() {
    const CHAT: i64 = 77;
    let url = fresh_store_url().await;
    let schema = schema_of(&url);
    let s = TgSetup::with(TgConfig {
        telegram: "dm_policy = \"open\"",
        tables: "[cluster]\nenabled = true\nlease_s = 5\n",
        ..TgConfig::default()
    })
    .await;
    s.tg.add_chat(ChatSpec::private(CHAT));
    let listens: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let base = std::fs::read_to_string(s.setup.config()).unwrap();
    let nodes: Vec<Chat> = (0..2)
        .map(|i| {
            let config = base
                .replace(
                    "dm_policy = \"open\"",
                    &format!(
                        "dm_policy = \"open\"\nwebhook_url = \"http://{0}/tg/hook\"\n\
                     webhook_listen = \"{0}\"\nwebhook_secret = \"{SECRET}\"",
                        listens[i]
                    ),
                )
                .replace(
                    "lease_s = 5\n",
                    &format!("lease_s = 5\nnode_id = \"n{i}\"\n"),
                );
            let mut cmd = node_command(&s.setup, &config, &url, i, "gateway");
            cmd.env("RUST_LOG", "warn");
            Chat::spawn(cmd)
        })
        .collect();
    let spread =
        s.tg.wait_for(
            |_| {
                let schema = schema.clone();
                let held = block_on(async move { holders(&schema).await });
                held.len() == 2 && held.iter().map(|h| h.1).sum::<i64>() == 64
            },
            Duration::from_secs(60),
        )
        .await;
    assert!(
        spread,
        "partitions not spread: {:?}",
        holders(&schema).await
    );

    let mut feeds = Vec::new();
    for i in 0..2 {
        feeds.push(subscribe(s.setup.path(&format!("data{i}.rpc"))).await);
    }

    // A long answer starts on whichever node runs the chat's session.
    post(&listens[0], &update(CHAT, CHAT, 1, "slow 300 100", false)).await;
    let streaming =
        s.tg.wait_for(
            |_| s.texts(CHAT).iter().any(|t| t.contains("tick 1 ")),
            Duration::from_secs(30),
        )
        .await;
    assert!(streaming, "no preview: {:?}", s.texts(CHAT));
    let key: String = query(&format!("SELECT session_key FROM {schema}.pending"))
        .await
        .first()
        .expect("the running turn is pending")
        .get(0);
    let partition = chela::store::partition_of(&key) as i32;
    let owner: String = query(&format!(
        "SELECT node FROM {schema}.leases WHERE partition = {partition}"
    ))
    .await[0]
        .get(0);
    let other = if owner == "n0" { 1 } else { 0 };

    // The next message right behind the /stop: it runs after the command, not dropped by it.
    for (n, text) in [(2, "/stop"), (3, "hello")] {
        post(&listens[other], &update(CHAT, CHAT, n, text, false)).await;
    }
    let stopped =
        s.tg.wait_for(
            |_| s.texts(CHAT).iter().any(|t| t == "Stopped."),
            Duration::from_secs(20),
        )
        .await;
    let answered =
        s.tg.wait_for(
            |_| s.texts(CHAT).iter().any(|t| t == "ok: hello"),
            Duration::from_secs(20),
        )
        .await;
    // Both nodes' feeds show both runs, wherever they ran.
    let both = |i: usize| {
        let frames = feeds[i].lock().unwrap().clone();
        let runs = runs_of(&frames, &key);
        runs.iter().any(|(status, _)| status == "aborted")
            && runs.iter().any(|(_, text)| text == "ok: hello")
    };
    let shown =
        s.tg.wait_for(|_| both(0) && both(1), Duration::from_secs(20))
            .await;
    let mut stderr = String::new();
    for node in nodes {
        node.signal("TERM");
        stderr.push_str(&node.finish().await.stderr);
    }
    let texts = s.texts(CHAT);
    assert!(stopped, "not stopped (owner {owner}): {texts:?}\n{stderr}");
    assert!(answered, "{texts:?}\n{stderr}");
    for (i, feed) in feeds.iter().enumerate() {
        let frames = feed.lock().unwrap().clone();
        assert!(
            shown,
            "node n{i} (owner {owner}) did not show both runs: {:?}",
            runs_of(&frames, &key)
        );
    }
    assert!(
        !texts.iter().any(|t| t.contains("tick 100")),
        "the long answer ran to its end: {texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "Nothing to stop."), "{texts:?}");
}
