//! ReplyStream under 429s, in paused time: nothing goes out before the wait the platform asked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::test_channel::{TestChannel, direct_chat};

fn limited(ms: u64) -> ChannelError {
    ChannelError::RateLimited { retry_after_ms: ms }
}

#[tokio::test(start_paused = true)]
async fn a_final_after_a_refused_preview_waits_the_retry_after() {
    let channel = TestChannel::new(1_000);
    channel.refuse([limited(2_500)]);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("Hello");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    // The run ends at once: the final must still wait out the 429.
    reply.finish("Hello there").await.unwrap();
    assert_eq!(
        channel.timed(),
        [
            (1_000, "send Hello".to_owned()),
            (3_500, "send Hello there".to_owned())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_final_is_retried_after_the_wait_each_time() {
    let channel = TestChannel::new(1_000);
    channel.refuse([limited(700), limited(700)]);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.finish("Done").await.unwrap();
    let at: Vec<u128> = channel.timed().into_iter().map(|(ms, _)| ms).collect();
    assert_eq!(at, [0, 700, 1_400]);
    assert_eq!(channel.calls(), ["send Done"; 3]);
}

#[tokio::test(start_paused = true)]
async fn previews_pause_for_the_retry_after_instead_of_the_edit_interval() {
    let channel = TestChannel::new(1_000);
    channel.refuse([limited(4_000)]);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("one");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    assert_eq!(
        reply.preview_due(),
        Some(channel.start + Duration::from_millis(5_000))
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    assert_eq!(channel.calls().len(), 1, "no preview inside the wait");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    reply.preview().await;
    assert_eq!(channel.timed()[1], (5_000, "send one".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_refused_final_edit_replaces_the_preview_instead_of_adding_a_copy() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("Hello");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    channel.refuse([ChannelError::Rejected("message can't be edited".into())]);
    reply.finish("Hello there").await.unwrap();
    // The preview goes before the final is sent: never the preview plus a second copy.
    assert_eq!(
        channel.calls(),
        [
            "send Hello",
            "edit Hello there",
            "delete s1",
            "send Hello there"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_final_edit_failing_on_the_transport_is_edited_again() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("Hello");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    channel.refuse([ChannelError::Transport("HTTP 500".into())]);
    assert!(reply.deliver_once("Hello there").await.is_err());
    reply.deliver_once("Hello there").await.unwrap();
    assert_eq!(
        channel.calls(),
        ["send Hello", "edit Hello there", "edit Hello there"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_preview_goes_once_a_few_words_exist_and_later_edits_are_paced() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("Short");
    assert_eq!(
        reply.preview_due(),
        Some(channel.start + Duration::from_millis(1_000)),
        "too little text: the preview waits for the pace"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    reply.push(" start of an answer that goes on");
    assert_eq!(reply.preview_due(), Some(tokio::time::Instant::now()));
    reply.preview().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    reply.push(" and on");
    reply.preview().await;
    assert_eq!(
        reply.preview_due(),
        Some(channel.start + Duration::from_millis(1_200)),
        "the next edit keeps the pace"
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    reply.preview().await;
    let at: Vec<u128> = channel.timed().into_iter().map(|(ms, _)| ms).collect();
    assert_eq!(at, [200, 1_200]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_first_preview_waits_for_the_pace_before_it_is_tried_again() {
    let channel = TestChannel::new(1_000);
    channel.refuse([ChannelError::Rejected("bot was blocked by the user".into())]);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("A first sentence that is long enough.");
    reply.preview().await;
    assert_eq!(channel.calls().len(), 1);
    assert_eq!(
        reply.preview_due(),
        Some(tokio::time::Instant::now() + Duration::from_millis(1_000)),
        "no second try at once"
    );
    reply.preview().await;
    assert_eq!(channel.calls().len(), 1, "not tried again inside the pace");
}

/// Opens files of a temporary folder by name (a name not there is refused).
struct Opener(tempfile::TempDir);

impl FileOpener for Opener {
    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> chela_channel::BoxFuture<'a, Result<chela_channel::OutboundFile, String>> {
        Box::pin(async move {
            let file = std::fs::File::open(self.0.path().join(path))
                .map_err(|e| format!("{path} does not exist: {e}"))?;
            let size = file.metadata().unwrap().len();
            Ok(chela_channel::OutboundFile::new(
                file,
                size,
                path.to_owned(),
            ))
        })
    }
}

/// Writes each of `names` in a temporary folder: the opener of that folder, and the names.
fn files(names: &[&str]) -> (Opener, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        std::fs::write(dir.path().join(name), name.as_bytes()).unwrap();
    }
    (Opener(dir), names.iter().map(|n| (*n).to_owned()).collect())
}

#[tokio::test(start_paused = true)]
async fn a_short_final_rides_as_the_first_files_caption() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.keyed("9.7".into());
    let (opener, files) = files(&["a.png", "b.pdf"]);
    reply
        .deliver_with_files("Here", &files, &opener, FileFailure::Note)
        .await
        .unwrap();
    assert_eq!(
        channel.calls(),
        ["file a.png [Here] #9.7.f0", "file b.pdf #9.7.f1"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_final_or_a_preview_goes_as_text_before_the_files() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    let long = "a caption longer than twenty chars";
    let (opener, one) = files(&["a.png"]);
    reply
        .deliver_with_files(long, &one, &opener, FileFailure::Note)
        .await
        .unwrap();
    assert_eq!(
        channel.calls(),
        [format!("send {long}"), "file a.png".into()]
    );

    // With a preview shown, the final completes it and the file follows.
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("Hi");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    reply
        .deliver_with_files("Hi there", &one, &opener, FileFailure::Note)
        .await
        .unwrap();
    assert_eq!(channel.calls(), ["send Hi", "edit Hi there", "file a.png"]);

    // Files alone: nothing but the files.
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply
        .deliver_with_files("", &one, &opener, FileFailure::Note)
        .await
        .unwrap();
    assert_eq!(channel.calls(), ["file a.png"]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_sends_only_what_did_not_get_through() {
    let channel = TestChannel::new(1_000);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    let (opener, files) = files(&["a.png", "b.pdf"]);
    let long = "a caption longer than twenty chars";
    let before = reply.progress();
    // The text goes, the first upload fails with a 5xx.
    channel.refuse_files([ChannelError::Transport("502".into())]);
    let refused = reply
        .deliver_with_files(long, &files, &opener, FileFailure::Note)
        .await;
    assert!(refused.unwrap_err().is_retryable());
    assert_ne!(reply.progress(), before, "the text got through: progress");
    reply
        .deliver_with_files(long, &files, &opener, FileFailure::Note)
        .await
        .unwrap();
    assert_eq!(
        channel.calls(),
        [
            format!("send {long}"),
            "file a.png".into(),
            "file a.png".into(),
            "file b.pdf".into()
        ],
        "the text once, the refused upload again, then the rest"
    );
}

#[tokio::test(start_paused = true)]
async fn a_file_line_is_never_previewed_and_the_final_does_not_repeat_the_text() {
    // Parts of at most 30 chars: the first part goes out before the answer ends.
    let channel = TestChannel::answering(30, false);
    let mut reply = ReplyStream::new(channel.clone(), direct_chat());
    reply.push("First line of the answer\nMEDIA:out/a.png\nsecond line, and a third one");
    reply.preview().await;
    let calls = channel.calls();
    assert!(!calls.iter().any(|c| c.contains("MEDIA")), "{calls:#?}");
    assert!(
        reply.text().contains("MEDIA:out/a.png"),
        "the final still has it"
    );

    // The outbox sends the final without its file lines.
    let (body, paths) = crate::reply::media_lines::split(reply.text());
    assert_eq!(paths, ["out/a.png"]);
    let shown = channel.calls().len();
    reply.deliver_once(&body).await.unwrap();
    let after: Vec<String> = channel.calls()[shown..].to_vec();
    assert!(
        !after.iter().any(|c| c.contains("First line")),
        "the part already shown is not sent again: {after:#?}"
    );
}

/// A journal that notes sent ids and says whether the reply may send, as told.
struct Fenced {
    may: std::sync::atomic::AtomicBool,
    noted: std::sync::Mutex<Vec<String>>,
}

impl SentJournal for Fenced {
    fn sent<'a>(
        &'a self,
        message: &'a SentMessage,
        _durable: bool,
    ) -> chela_channel::BoxFuture<'a, ()> {
        self.noted.lock().unwrap().push(message.message_id.clone());
        Box::pin(async {})
    }

    fn may_send(&self) -> bool {
        self.may.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn a_reply_whose_node_lost_the_session_sends_no_new_message_but_edits_its_own() {
    let channel = TestChannel::new(1_000);
    let journal = Arc::new(Fenced {
        may: true.into(),
        noted: Default::default(),
    });
    let mut reply =
        ReplyStream::new(channel.clone(), direct_chat()).journaled(Some(journal.clone()));
    reply.push("Hello");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    journal
        .may
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // An edit of the journaled preview may go (the new holder takes it back)...
    reply.push(" there");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    reply.preview().await;
    // ...but no new message: neither a fresh reply nor its final.
    let mut fresh =
        ReplyStream::new(channel.clone(), direct_chat()).journaled(Some(journal.clone()));
    fresh.push("Other");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    fresh.preview().await;
    assert!(fresh.deliver_once("Other").await.is_err());
    assert_eq!(channel.calls(), ["send Hello", "edit Hello there"]);
    assert_eq!(*journal.noted.lock().unwrap(), ["s1"]);
}
