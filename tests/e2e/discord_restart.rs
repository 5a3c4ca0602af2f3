//! End-to-end, Discord around a restart through `chela gateway` against the fake Discord:
//! what is posted while chela is down is read from history after READY, messages dispatched
//! the moment READY arrives are taken, a final resent after a crash is not posted twice
//! (its nonce comes from the outbox record), and taking back a cut reply does not hold up
//! the connection.

use crate::common;

use chela_testkit::discord::{ChannelSpec, UserSpec};
use common::count;
use common::discord::{DcConfig, DcSetup, text_channel};

fn ann() -> UserSpec {
    UserSpec::new(7101, "ann")
}

/// Whether some bot message in `channel` is exactly `ok: <text>`.
fn answered(s: &DcSetup, channel: u64, text: &str) -> bool {
    let want = format!("ok: {text}");
    s.texts(channel).iter().any(|t| t.trim_end() == want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_posted_while_chela_is_down_are_answered_once_after_restart() {
    const CHAN: u64 = 3_000_001;
    const DM: u64 = 3_000_002;
    // Followup: each message is a turn of its own (steer would fold the two into one run).
    let s = DcSetup::with(DcConfig {
        mode: "followup",
        ..DcConfig::default()
    })
    .await;
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "before");
    s.dc.user_sends(ChannelSpec::dm(DM), ann(), "dm before");
    gw.wait(&s, "both first answers", |s| {
        answered(s, CHAN, "before") && answered(s, DM, "dm before")
    })
    .await;
    gw.kill().await;

    // Posted while no chela is connected: no session, so no gateway event ever carries them.
    let down = [
        s.mention(text_channel(CHAN), ann(), "while down 1"),
        s.mention(text_channel(CHAN), ann(), "while down 2"),
    ];
    s.dc.user_sends(ChannelSpec::dm(DM), ann(), "dm while down");
    let mut gw = s.gateway().await;
    gw.wait(&s, "the answers to what came while down", |s| {
        answered(s, CHAN, "while down 2") && answered(s, DM, "dm while down")
    })
    .await;
    let log = gw.stop().await;
    assert!(log.contains("discord caught up on history"), "{log}");

    let texts: Vec<String> = s.texts(CHAN).iter().map(|t| t.trim_end().into()).collect();
    assert_eq!(
        texts,
        ["ok: before", "ok: while down 1", "ok: while down 2"],
        "each answered once, in order"
    );
    let refs: Vec<_> = s.sent(CHAN).iter().map(|m| m.reference).collect();
    assert_eq!(&refs[1..], &[Some(down[0]), Some(down[1])]);
    let dm: Vec<String> = s.texts(DM).iter().map(|t| t.trim_end().into()).collect();
    assert_eq!(dm, ["ok: dm before", "ok: dm while down"]);
    let asked = s.asked().concat();
    for text in ["while down 1", "while down 2", "dm while down"] {
        assert_eq!(count(&asked, text), 1, "{text} asked once: {asked}");
    }
    s.assert_settled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_dispatched_right_after_ready_are_all_answered() {
    let s = DcSetup::open().await;
    // Fresh channels and DMs: no cursor, so only the gateway events can bring these in.
    s.dc.hold_messages_until_ready();
    let chans: Vec<u64> = (0..8).map(|i| 3_100_000 + i).collect();
    for (i, chan) in chans.iter().enumerate() {
        if i % 2 == 0 {
            s.mention(text_channel(*chan), ann(), &format!("early {i}"));
        } else {
            // One user per DM: DMs of one user share a session, where a message arriving
            // during the first one's run is steered into it and answered there.
            let user = UserSpec::new(7200 + i as u64, &format!("dm{i}"));
            s.dc.user_sends(ChannelSpec::dm(*chan), user, &format!("early {i}"));
        }
    }
    let mut gw = s.gateway().await;
    gw.wait(&s, "an answer to every early message", |s| {
        chans
            .iter()
            .enumerate()
            .all(|(i, c)| answered(s, *c, &format!("early {i}")))
    })
    .await;
    let log = gw.stop().await;
    assert!(!log.contains("message dropped"), "{log}");
    for chan in &chans {
        assert_eq!(s.sent(*chan).len(), 1, "answered once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_resent_after_a_crash_is_one_message_by_its_nonce() {
    const CHAN: u64 = 3_200_001;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    // The final reaches Discord, but chela dies before it hears back: nothing marks it sent.
    s.dc.hold_creates(true);
    s.mention(text_channel(CHAN), ann(), "only once");
    gw.wait(&s, "the final made on Discord", |s| {
        !s.dc.sent(CHAN).is_empty()
    })
    .await;
    gw.kill().await;
    s.dc.hold_creates(false);
    let path = format!("/channels/{CHAN}/messages");
    assert_eq!(s.dc.call_count("POST", &path), 1);

    let mut gw = s.gateway().await;
    gw.wait(&s, "the resend of the recorded final", |s| {
        s.dc.call_count("POST", &path) >= 2
    })
    .await;
    let log = gw.stop().await;
    let nonces: Vec<_> =
        s.dc.calls()
            .iter()
            .filter(|c| c.method == "POST" && c.path == path)
            .map(|c| c.body["nonce"].clone())
            .collect();
    assert_eq!(nonces[0], nonces[1], "the same nonce: {nonces:?}");
    let sent = s.dc.sent(CHAN);
    assert_eq!(
        sent.len(),
        1,
        "one message in the channel: {sent:#?}\n{log}"
    );
    assert_eq!(sent[0].content.trim_end(), "ok: only once");
    assert!(!sent[0].deleted);
    assert_eq!(count(&s.asked().concat(), "only once"), 1);
    s.assert_settled().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taking_back_a_cut_reply_does_not_hold_up_the_connection() {
    const CHAN: u64 = 3_300_001;
    const OTHER: u64 = 3_300_002;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    s.mention(text_channel(CHAN), ann(), "slow 200 20");
    gw.wait(&s, "the first preview", |s| !s.texts(CHAN).is_empty())
        .await;
    let first = s.texts(CHAN);
    gw.wait(&s, "an edit of the preview", |s| s.texts(CHAN) != first)
        .await;
    gw.kill().await;

    // Discord is slow to delete: the restart must connect and take messages meanwhile.
    s.dc.hold_deletes(true);
    let mut gw = s.gateway().await;
    s.mention(text_channel(OTHER), ann(), "while taking back");
    gw.wait(&s, "an answer while the take-back waits", |s| {
        answered(s, OTHER, "while taking back")
    })
    .await;
    assert!(
        s.dc.calls().iter().any(|c| c.method == "DELETE"),
        "the take-back was asked for"
    );
    assert!(
        s.dc.sent(CHAN).iter().all(|m| !m.deleted),
        "and is still held"
    );
    s.dc.hold_deletes(false);
    let want: String = (1..=20).map(|i| format!("tick {i} ")).collect();
    gw.wait(&s, "the complete answer and the take-back", |s| {
        s.texts(CHAN)
            .iter()
            .any(|t| t.trim_end() == want.trim_end())
            && s.dc.sent(CHAN).iter().any(|m| m.deleted)
    })
    .await;
    gw.stop().await;
    let texts = s.texts(CHAN);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    s.assert_settled().await;
}
