//! The fake Discord gateway over a real WebSocket: HELLO, IDENTIFY -> READY, heartbeats,
//! dispatches and their fields, intents, RESUME with replay, invalid sessions, close codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use chela_testkit::discord::{ChannelSpec, FakeDiscord, MessageOptions, UserSpec};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

const GUILDS: u64 = 1;
const GUILD_MESSAGES: u64 = 1 << 9;
const DIRECT_MESSAGES: u64 = 1 << 12;
const MESSAGE_CONTENT: u64 = 1 << 15;
const ALL: u64 = GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT;
const WAIT: Duration = Duration::from_secs(5);

const GUILD: u64 = 800;
const CHANNEL: u64 = 801;

/// What the client saw next.
#[derive(Debug)]
enum Seen {
    Payload(Value),
    Closed(Option<u16>),
    /// The connection ended without a close frame (or with a transport error).
    Reset,
}

struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Client {
    /// Connects as serenity does (`{url}?v=10`) and reads HELLO.
    async fn connect(fake: &FakeDiscord) -> (Client, Value) {
        let url = format!("{}?v=10&encoding=json", fake.gateway_url());
        let (ws, _) = connect_async(url).await.unwrap();
        let mut client = Client { ws };
        let hello = client.recv().await;
        (client, hello)
    }

    async fn next(&mut self) -> Seen {
        loop {
            let item = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("gateway answered in time");
            match item {
                Some(Ok(Message::Text(text))) => {
                    return Seen::Payload(serde_json::from_str(&text).unwrap());
                }
                Some(Ok(Message::Close(frame))) => {
                    return Seen::Closed(frame.map(|f| u16::from(f.code)));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Seen::Reset,
            }
        }
    }

    async fn recv(&mut self) -> Value {
        match self.next().await {
            Seen::Payload(value) => value,
            other => panic!("expected a payload, got {other:?}"),
        }
    }

    /// The next dispatch of type `kind`, skipping others.
    async fn recv_dispatch(&mut self, kind: &str) -> Value {
        loop {
            let payload = self.recv().await;
            if payload["op"] == 0 && payload["t"] == kind {
                return payload;
            }
        }
    }

    async fn send(&mut self, value: Value) {
        self.ws
            .send(Message::Text(value.to_string()))
            .await
            .unwrap();
    }

    /// IDENTIFY with `intents`; returns the READY payload.
    async fn identify(&mut self, intents: u64) -> Value {
        self.identify_shard(intents, [0, 1]).await
    }

    /// IDENTIFY with `intents` as shard `shard` (`[id, num_shards]`); returns READY.
    async fn identify_shard(&mut self, intents: u64, shard: [u32; 2]) -> Value {
        self.send(json!({
            "op": 2,
            "d": {
                "token": format!("Bot {}", FakeDiscord::TOKEN),
                "intents": intents,
                "properties": { "os": "linux", "browser": "test", "device": "test" },
                "compress": false,
                "large_threshold": 250,
                "shard": shard,
            },
        }))
        .await;
        self.recv_dispatch("READY").await
    }
}

fn alice() -> UserSpec {
    UserSpec::new(900, "alice").with_global_name("Alice")
}

#[tokio::test]
async fn hello_identify_ready_guild_create_and_heartbeat_ack() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_guild(GUILD, "Test guild");
    fake.add_channel(ChannelSpec::guild_text(GUILD, CHANNEL));
    let (mut client, hello) = Client::connect(&fake).await;
    assert_eq!(hello["op"], 10);
    assert_eq!(hello["d"]["heartbeat_interval"], 41_250);
    assert!(!fake.connected());

    let ready = client.identify(ALL).await;
    assert_eq!(ready["s"], 1);
    let d = &ready["d"];
    assert_eq!(d["v"], 10);
    assert_eq!(d["user"]["id"], FakeDiscord::BOT_ID.to_string());
    assert_eq!(d["user"]["username"], "chela_test");
    assert_eq!(d["user"]["discriminator"], "0");
    assert_eq!(d["user"]["bot"], true);
    assert_eq!(d["guilds"], json!([{ "id": "800", "unavailable": true }]));
    assert!(!d["session_id"].as_str().unwrap().is_empty());
    assert_eq!(d["resume_gateway_url"], fake.gateway_url());
    assert_eq!(
        d["application"]["id"],
        FakeDiscord::APPLICATION_ID.to_string()
    );
    assert!(d["application"]["flags"].is_u64());
    assert_eq!(d["shard"], json!([0, 1]));

    let guild = client.recv_dispatch("GUILD_CREATE").await;
    assert_eq!(guild["s"], 2);
    assert_eq!(guild["d"]["id"], "800");
    assert_eq!(guild["d"]["name"], "Test guild");
    assert_eq!(guild["d"]["channels"][0]["id"], "801");
    assert_eq!(guild["d"]["channels"][0]["type"], 0);

    assert!(fake.connected());
    assert_eq!(fake.identify_count(), 1);
    assert_eq!(fake.intents(), Some(ALL));
    assert_eq!(fake.session_id().as_deref(), d["session_id"].as_str());

    client.send(json!({ "op": 1, "d": 2 })).await;
    let ack = client.recv().await;
    assert_eq!(ack["op"], 11);
    assert_eq!(fake.heartbeat_count(), 1);
    assert_eq!(fake.gateway_received().len(), 2);
}

#[tokio::test]
async fn message_create_carries_every_field_serenity_needs() {
    let fake = FakeDiscord::start().await.unwrap();
    let (mut client, _) = Client::connect(&fake).await;
    client.identify(ALL).await;

    let id = fake.user_sends(ChannelSpec::guild_text(GUILD, CHANNEL), alice(), "hello");
    // The guild is new to the session: GUILD_CREATE comes first.
    let guild = client.recv_dispatch("GUILD_CREATE").await;
    assert_eq!(guild["d"]["id"], "800");
    let created = client.recv_dispatch("MESSAGE_CREATE").await;
    assert!(created["s"].is_u64());
    let m = &created["d"];
    assert_eq!(m["id"], id.to_string());
    assert_eq!(m["channel_id"], "801");
    assert_eq!(m["guild_id"], "800");
    assert_eq!(
        m["author"],
        json!({
            "id": "900", "username": "alice", "discriminator": "0", "global_name": "Alice",
            "avatar": null, "public_flags": 0,
        })
    );
    assert_eq!(m["content"], "hello");
    assert!(m["timestamp"].as_str().unwrap().ends_with("+00:00"));
    for (field, value) in [
        ("tts", json!(false)),
        ("mention_everyone", json!(false)),
        ("mentions", json!([])),
        ("mention_roles", json!([])),
        ("attachments", json!([])),
        ("embeds", json!([])),
        ("pinned", json!(false)),
        ("type", json!(0)),
    ] {
        assert_eq!(m[field], value, "{field}");
    }
    assert_eq!(m["member"]["roles"], json!([]));

    // A DM: no guild_id, no member.
    fake.user_sends(ChannelSpec::dm(700), alice(), "psst");
    let dm = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(dm["d"]["channel_id"], "700");
    assert!(dm["d"].get("guild_id").is_none());
    assert!(dm["d"].get("member").is_none());

    // A reply that mentions the bot.
    let reply = fake.user_sends_with(
        ChannelSpec::guild_text(GUILD, CHANNEL),
        UserSpec::new(901, "bob"),
        "what do you think?",
        MessageOptions {
            mentions_bot: true,
            referenced_message_id: Some(id),
            ..MessageOptions::default()
        },
    );
    let m = client.recv_dispatch("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(m["id"], reply.to_string());
    assert_eq!(
        m["content"],
        format!("<@{}> what do you think?", FakeDiscord::BOT_ID)
    );
    let mentioned: Vec<&str> = m["mentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap())
        .collect();
    assert_eq!(mentioned, [FakeDiscord::BOT_ID.to_string().as_str(), "900"]);
    assert_eq!(m["type"], 19);
    assert_eq!(m["message_reference"]["message_id"], id.to_string());
    assert_eq!(m["referenced_message"]["content"], "hello");

    // A message in a thread the fake did not know: THREAD_CREATE, then the message.
    fake.user_sends(
        ChannelSpec::thread(GUILD, 850, CHANNEL),
        alice(),
        "in thread",
    );
    let thread = client.recv_dispatch("THREAD_CREATE").await["d"].clone();
    assert_eq!(thread["id"], "850");
    assert_eq!(thread["type"], 11);
    assert_eq!(thread["parent_id"], "801");
    assert_eq!(thread["guild_id"], "800");
    assert_eq!(thread["owner_id"], "900");
    let m = client.recv_dispatch("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(m["channel_id"], "850");
    assert_eq!(m["guild_id"], "800");
    assert_eq!(fake.threads()[0].parent_id, CHANNEL);

    // Sequence numbers grow by one.
    let seqs: Vec<u64> = fake
        .dispatches()
        .iter()
        .map(|d| d["s"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn intents_decide_what_is_dispatched_and_whether_content_is_visible() {
    let fake = FakeDiscord::start().await.unwrap();
    let (mut client, _) = Client::connect(&fake).await;
    client.identify(GUILD_MESSAGES | DIRECT_MESSAGES).await;
    let channel = ChannelSpec::guild_text(GUILD, CHANNEL);
    fake.user_sends(channel.clone(), alice(), "secret");
    let hidden = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(hidden["d"]["content"], "", "no MESSAGE_CONTENT intent");
    let options = MessageOptions {
        mentions_bot: true,
        ..MessageOptions::default()
    };
    fake.user_sends_with(channel, alice(), "hey bot", options);
    let shown = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(
        shown["d"]["content"],
        format!("<@{}> hey bot", FakeDiscord::BOT_ID)
    );
    fake.user_sends(ChannelSpec::dm(700), alice(), "dm text");
    let dm = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(dm["d"]["content"], "dm text", "DMs always carry content");
    // No GUILDS intent: neither GUILD_CREATE nor THREAD_CREATE was dispatched.
    fake.user_sends(ChannelSpec::thread(GUILD, 850, CHANNEL), alice(), "t");
    client.recv_dispatch("MESSAGE_CREATE").await;
    let kinds: Vec<String> = fake
        .dispatches()
        .iter()
        .map(|d| d["t"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "READY",
            "MESSAGE_CREATE",
            "MESSAGE_CREATE",
            "MESSAGE_CREATE",
            "MESSAGE_CREATE"
        ]
    );

    // Only DIRECT_MESSAGES: guild messages are not dispatched at all.
    let fake = FakeDiscord::start().await.unwrap();
    let (mut client, _) = Client::connect(&fake).await;
    client.identify(DIRECT_MESSAGES).await;
    fake.user_sends(ChannelSpec::guild_text(GUILD, CHANNEL), alice(), "x");
    fake.user_sends(ChannelSpec::dm(700), alice(), "y");
    let dm = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(dm["d"]["channel_id"], "700");
    assert_eq!(fake.dispatches().len(), 2);
}

#[tokio::test]
async fn resume_replays_what_was_missed_then_resumed() {
    let fake = FakeDiscord::start().await.unwrap();
    let channel = ChannelSpec::guild_text(GUILD, CHANNEL);
    fake.add_channel(channel.clone());
    let (mut client, _) = Client::connect(&fake).await;
    let ready = client.identify(ALL).await;
    let session = ready["d"]["session_id"].as_str().unwrap().to_owned();
    client.recv_dispatch("GUILD_CREATE").await;
    fake.user_sends(channel.clone(), alice(), "one");
    let one = client.recv_dispatch("MESSAGE_CREATE").await;
    let seen = one["s"].as_u64().unwrap();

    assert_eq!(fake.drop_connection(), 1);
    assert!(matches!(client.next().await, Seen::Reset));
    assert!(fake.wait_for(|f| !f.connected(), WAIT).await);
    let two = fake.user_sends(channel.clone(), alice(), "two");
    let three = fake.user_sends(channel.clone(), alice(), "three");

    let (mut client, hello) = Client::connect(&fake).await;
    assert_eq!(hello["op"], 10);
    client
        .send(json!({
            "op": 6,
            "d": { "token": format!("Bot {}", FakeDiscord::TOKEN), "session_id": session, "seq": seen },
        }))
        .await;
    let first = client.recv().await;
    assert_eq!(first["t"], "MESSAGE_CREATE");
    assert_eq!(first["s"], seen + 1);
    assert_eq!(first["d"]["id"], two.to_string());
    let second = client.recv().await;
    assert_eq!(second["s"], seen + 2);
    assert_eq!(second["d"]["id"], three.to_string());
    let resumed = client.recv().await;
    assert_eq!(resumed["t"], "RESUMED");
    assert_eq!(resumed["s"], seen + 2);
    assert!(fake.connected());
    assert_eq!(fake.resume_count(), 1);
    assert_eq!(fake.identify_count(), 1);

    // Live dispatches continue on the resumed connection.
    fake.user_sends(channel, alice(), "four");
    let four = client.recv_dispatch("MESSAGE_CREATE").await;
    assert_eq!(four["s"], seen + 3);

    // RESUME of a session that does not exist: op 9, not resumable.
    let (mut other, _) = Client::connect(&fake).await;
    other
        .send(json!({
            "op": 6,
            "d": { "token": FakeDiscord::TOKEN, "session_id": "nope", "seq": 1 },
        }))
        .await;
    let invalid = other.recv().await;
    assert_eq!(invalid["op"], 9);
    assert_eq!(invalid["d"], false);
}

#[tokio::test]
async fn invalid_session_forces_a_new_identify() {
    let fake = FakeDiscord::start().await.unwrap();
    let (mut client, _) = Client::connect(&fake).await;
    let ready = client.identify(ALL).await;
    let session = ready["d"]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(fake.invalid_session(), 1);
    let nine = client.recv().await;
    assert_eq!(nine, json!({ "op": 9, "d": false, "s": null, "t": null }));
    assert!(!fake.connected());
    assert_eq!(fake.session_id(), None);
    // Lost: there is no session to queue it in.
    fake.user_sends(ChannelSpec::dm(700), alice(), "lost");
    drop(client);

    let (mut client, _) = Client::connect(&fake).await;
    client
        .send(json!({
            "op": 6,
            "d": { "token": FakeDiscord::TOKEN, "session_id": session, "seq": 1 },
        }))
        .await;
    assert_eq!(client.recv().await["op"], 9);
    let ready = client.identify(ALL).await;
    assert_eq!(ready["s"], 1);
    assert_ne!(ready["d"]["session_id"], session.as_str());
    assert_eq!(fake.identify_count(), 2);
    assert_eq!(fake.resume_count(), 0);
    assert_eq!(fake.dispatches().len(), 1, "only READY: the DM was lost");
}

#[tokio::test]
async fn reconnect_requests_and_close_codes() {
    let fake = FakeDiscord::start().await.unwrap();
    let (mut client, _) = Client::connect(&fake).await;
    client.identify(ALL).await;
    assert_eq!(fake.request_reconnect(), 1);
    assert_eq!(client.recv().await["op"], 7);
    assert_eq!(fake.close_connection(4000), 1);
    assert!(matches!(client.next().await, Seen::Closed(Some(4000))));

    // A wrong token.
    let (mut client, _) = Client::connect(&fake).await;
    client
        .send(json!({ "op": 2, "d": { "token": "Bot wrong", "intents": 0 } }))
        .await;
    assert!(matches!(client.next().await, Seen::Closed(Some(4004))));
    // Privileged intents this bot does not have (GUILD_MEMBERS).
    let (mut client, _) = Client::connect(&fake).await;
    client
        .send(json!({ "op": 2, "d": { "token": FakeDiscord::TOKEN, "intents": 2 } }))
        .await;
    assert!(matches!(client.next().await, Seen::Closed(Some(4014))));
    fake.allow_privileged_intents(true);
    let (mut client, _) = Client::connect(&fake).await;
    assert_eq!(client.identify(ALL | 2).await["s"], 1);
    drop(client);
    // An unknown opcode, and a payload that is not JSON.
    let (mut client, _) = Client::connect(&fake).await;
    client.send(json!({ "op": 42 })).await;
    assert!(matches!(client.next().await, Seen::Closed(Some(4001))));
    let (mut client, _) = Client::connect(&fake).await;
    client.ws.send(Message::Text("{".to_owned())).await.unwrap();
    assert!(matches!(client.next().await, Seen::Closed(Some(4002))));
    // A second IDENTIFY on one connection.
    let (mut client, _) = Client::connect(&fake).await;
    client.identify(ALL).await;
    client
        .send(json!({ "op": 2, "d": { "token": FakeDiscord::TOKEN, "intents": 0 } }))
        .await;
    loop {
        match client.next().await {
            Seen::Payload(_) => {}
            Seen::Closed(code) => {
                assert_eq!(code, Some(4005));
                break;
            }
            Seen::Reset => panic!("expected close 4005"),
        }
    }
}

#[tokio::test]
async fn shorter_heartbeat_interval_and_shutdown_end_connections() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.set_heartbeat_interval(Duration::from_millis(500));
    let (mut client, hello) = Client::connect(&fake).await;
    assert_eq!(hello["d"]["heartbeat_interval"], 500);
    client.identify(ALL).await;
    assert_eq!(fake.open_connections(), 1);
    fake.shutdown().await.unwrap();
    assert!(matches!(client.next().await, Seen::Reset | Seen::Closed(_)));
}

#[tokio::test]
async fn each_shard_gets_the_events_of_its_guilds_and_dms_go_to_shard_zero() {
    // (guild_id >> 22) % 2: guild 4 << 22 is shard 0's, 5 << 22 shard 1's.
    const EVEN: u64 = 4 << 22;
    const ODD: u64 = 5 << 22;
    let fake = FakeDiscord::start().await.unwrap();
    fake.set_recommended_shards(2);
    fake.add_guild(EVEN, "even");
    fake.add_guild(ODD, "odd");
    let (mut zero, _) = Client::connect(&fake).await;
    let (mut one, _) = Client::connect(&fake).await;
    let ready = zero.identify_shard(ALL, [0, 2]).await;
    assert_eq!(ready["d"]["shard"], json!([0, 2]));
    assert_eq!(
        ready["d"]["guilds"],
        json!([{ "id": EVEN.to_string(), "unavailable": true }])
    );
    let ready = one.identify_shard(ALL, [1, 2]).await;
    assert_eq!(
        ready["d"]["guilds"],
        json!([{ "id": ODD.to_string(), "unavailable": true }])
    );
    assert_eq!(
        one.recv_dispatch("GUILD_CREATE").await["d"]["id"],
        ODD.to_string()
    );
    assert_eq!(
        zero.recv_dispatch("GUILD_CREATE").await["d"]["id"],
        EVEN.to_string()
    );
    assert_eq!(fake.connected_shards(), vec![[0, 2], [1, 2]]);

    fake.user_sends(ChannelSpec::guild_text(ODD, ODD + 1), alice(), "to odd");
    fake.user_sends(ChannelSpec::guild_text(EVEN, EVEN + 1), alice(), "to even");
    fake.user_sends(ChannelSpec::dm(700), alice(), "direct");
    let got = |d: Value| d["d"]["content"].as_str().unwrap().to_owned();
    assert_eq!(got(one.recv_dispatch("MESSAGE_CREATE").await), "to odd");
    assert_eq!(got(zero.recv_dispatch("MESSAGE_CREATE").await), "to even");
    assert_eq!(got(zero.recv_dispatch("MESSAGE_CREATE").await), "direct");
    let odd: Vec<String> = fake
        .shard_dispatches(1)
        .iter()
        .filter(|d| d["t"] == "MESSAGE_CREATE")
        .map(|d| got(d.clone()))
        .collect();
    assert_eq!(
        odd,
        ["to odd"],
        "shard 1 got neither the even guild's nor the DM"
    );

    let bot = reqwest::Client::new()
        .get(format!("{}/api/v10/gateway/bot", fake.rest_url()))
        .header("Authorization", format!("Bot {}", FakeDiscord::TOKEN))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(bot["shards"], 2);
}

#[tokio::test]
async fn shards_of_another_num_shards_have_sessions_of_their_own() {
    // Guild 6 << 22: shard 0 of 2 and shard 0 of 3 both serve it.
    const GUILD6: u64 = 6 << 22;
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_guild(GUILD6, "six");
    let (mut two, _) = Client::connect(&fake).await;
    let (mut three, _) = Client::connect(&fake).await;
    two.identify_shard(ALL, [0, 2]).await;
    three.identify_shard(ALL, [0, 3]).await;
    assert_eq!(
        fake.connected_shards(),
        vec![[0, 2], [0, 3]],
        "the second IDENTIFY did not replace the first's session"
    );
    fake.user_sends(ChannelSpec::guild_text(GUILD6, GUILD6 + 1), alice(), "hi");
    let got = |d: Value| d["d"]["content"].as_str().unwrap().to_owned();
    assert_eq!(got(two.recv_dispatch("MESSAGE_CREATE").await), "hi");
    assert_eq!(got(three.recv_dispatch("MESSAGE_CREATE").await), "hi");
    for shard in [[0, 2], [0, 3]] {
        let created = fake
            .layout_dispatches(shard)
            .iter()
            .filter(|d| d["t"] == "MESSAGE_CREATE")
            .count();
        assert_eq!(created, 1, "{shard:?}");
    }
}
