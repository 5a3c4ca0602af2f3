//! End-to-end, Discord with `[channels.discord] shards = 2` on one `chela gateway` against
//! the fake Discord: both shards IDENTIFY (`[0, 2]` and `[1, 2]`), the fake sends each
//! guild's events only to its shard (`(guild_id >> 22) % 2`) and DMs to shard 0, and
//! messages in guilds of both shards and in a DM are each answered once.

use crate::common;

use chela_testkit::discord::{ChannelSpec, UserSpec, shard_of};
use common::discord::{DcConfig, DcSetup};

/// A guild of shard 0 and one of shard 1 (of 2).
const EVEN: u64 = 1_000 << 22;
const ODD: u64 = 1_001 << 22;

fn ann() -> UserSpec {
    UserSpec::new(7301, "ann")
}

/// Whether the bot's messages in `channel` are exactly one `ok: <text>`.
fn answered_once(s: &DcSetup, channel: u64, text: &str) -> bool {
    let texts: Vec<String> = s
        .texts(channel)
        .iter()
        .map(|t| t.trim_end().into())
        .collect();
    texts == [format!("ok: {text}")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_shards_one_gateway_answers_the_guilds_of_both() {
    assert_eq!((shard_of(Some(EVEN), 2), shard_of(Some(ODD), 2)), (0, 1));
    let s = DcSetup::with(DcConfig {
        mode: "followup",
        discord: "group_policy = \"open\"\ndm_policy = \"open\"\nshards = 2",
        ..DcConfig::default()
    })
    .await;
    s.dc.add_guild(EVEN, "even");
    s.dc.add_guild(ODD, "odd");
    let mut gw = s.gateway().await;
    gw.wait(&s, "both shards connected", |s| {
        s.dc.connected_shards() == [[0, 2], [1, 2]]
    })
    .await;
    // Each shard IDENTIFYs once, with its pair (in either order: shards of different
    // `max_concurrency` buckets may start together).
    let mut identified: Vec<String> =
        s.dc.gateway_received()
            .into_iter()
            .filter(|p| p["op"] == 2)
            .map(|p| p["d"]["shard"].to_string())
            .collect();
    identified.sort();
    assert_eq!(identified, ["[0,2]", "[1,2]"]);

    let (even, odd, dm) = (EVEN + 1, ODD + 1, 3_400_001);
    s.mention(ChannelSpec::guild_text(EVEN, even), ann(), "to shard zero");
    s.mention(ChannelSpec::guild_text(ODD, odd), ann(), "to shard one");
    s.dc.user_sends(ChannelSpec::dm(dm), UserSpec::new(7302, "bo"), "a dm");
    gw.wait(&s, "an answer in each guild and the DM", |s| {
        answered_once(s, even, "to shard zero")
            && answered_once(s, odd, "to shard one")
            && answered_once(s, dm, "a dm")
    })
    .await;
    let log = gw.stop().await;
    assert_eq!(log.matches("discord connected").count(), 2, "{log}");
    for (channel, text) in [(even, "to shard zero"), (odd, "to shard one"), (dm, "a dm")] {
        assert!(answered_once(&s, channel, text), "{:?}", s.texts(channel));
    }
    let asked = s.asked().concat();
    for text in ["to shard zero", "to shard one", "a dm"] {
        assert_eq!(common::count(&asked, text), 1, "{text} asked once: {asked}");
    }
}
