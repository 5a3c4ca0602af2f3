//! The outbox worker with voice notes (docs/voice.md), against the kit's fake speech
//! endpoint: beside the text or instead of it (the preview then goes), the text when the voice
//! cannot go, one synthesis and one voice note across retries and a restart. Real sockets, so
//! the clock is not paused (nothing here measures time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use chela_testkit::FakeSpeech;

use super::*;
use crate::config::{TtsConfig, TtsMode};
use crate::test_channel::{TestChannel, direct_chat};

const KEY: &str = "agent:main:main";

struct Setup {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    channel: Arc<TestChannel>,
    store: Store,
    speech: FakeSpeech,
    voices: Arc<Voices>,
}

async fn setup(mode: TtsMode) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let speech = FakeSpeech::start().await.unwrap();
    let tts = TtsConfig {
        url: speech.base_url(),
        mode,
        ..TtsConfig::default()
    };
    let store = Store::temporary().unwrap();
    crate::delivery::tts_choice::choose(&store, KEY, Some(true)).unwrap();
    Setup {
        _dir: dir,
        ws,
        channel: TestChannel::new(0),
        store,
        speech,
        voices: Voices::from_config(&tts).unwrap(),
    }
}

impl Setup {
    fn outbox(&self, shutdown: CancellationToken) -> Outbox {
        let channels =
            HashMap::from([("test".to_owned(), self.channel.clone() as Arc<dyn Channel>)]);
        let files = FilePolicy::new(self.ws.clone(), Vec::new());
        let ttl = Duration::from_secs(600);
        Outbox::new(
            self.store.clone(),
            channels,
            ttl,
            shutdown,
            files,
            Some(self.voices.clone()),
        )
    }

    /// Records `text` as run `run-1`'s final and delivers it (after `preview` was shown, if
    /// given) until the worker is idle; its id.
    async fn deliver(&self, outbox: &Outbox, text: &str, preview: Option<&str>) -> u64 {
        let created_ms = now_ms();
        let to = direct_chat();
        let run = crate::domain::run::RunRecord::for_test("run-1", KEY, &[]);
        let id = self
            .store
            .settle_turn(&run, false, &to, text)
            .await
            .unwrap();
        let mut stream = None;
        if let Some(shown) = preview {
            let mut live = ReplyStream::new(self.channel.clone(), to.clone());
            live.push(shown);
            live.preview().await;
            stream = Some(live);
        }
        outbox.submit(Delivery {
            id,
            session_key: KEY.to_owned(),
            to,
            text: text.to_owned(),
            created_ms,
            run_id: Some("run-1".to_owned()),
            stream,
            take_back: None,
        });
        outbox.idle().await;
        id
    }

    /// Waits until final `id`'s audio file is gone (removed in the background).
    async fn audio_removed(&self, id: u64) {
        let path = self.ws.join(format!("media/tts/reply-{id}.ogg"));
        for _ in 0..500 {
            if !path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} stayed", path.display());
    }
}

#[tokio::test]
async fn beside_the_voice_note_follows_the_text() {
    let s = setup(TtsMode::Beside).await;
    let outbox = s.outbox(CancellationToken::new());
    let id = s.deliver(&outbox, "Hello **there**", None).await;
    assert_eq!(
        s.channel.calls(),
        [
            "send Hello **there**".to_owned(),
            format!("file reply-{id}.ogg #{id}.7.v"),
        ]
    );
    assert_eq!(
        s.channel.uploads(),
        [(format!("reply-{id}.ogg"), FakeSpeech::AUDIO.to_vec())]
    );
    assert_eq!(s.speech.requests()[0].input(), "Hello there");
    assert_eq!(s.store.undelivered().unwrap(), []);
    s.audio_removed(id).await;
}

#[tokio::test]
async fn instead_the_voice_note_replaces_the_preview() {
    let s = setup(TtsMode::Instead).await;
    let outbox = s.outbox(CancellationToken::new());
    let id = s.deliver(&outbox, "Hello there", Some("Hello the")).await;
    assert_eq!(
        s.channel.calls(),
        [
            "send Hello the".to_owned(),
            format!("file reply-{id}.ogg #{id}.7.v"),
            "delete s1".to_owned(),
        ]
    );
    assert_eq!(s.store.undelivered().unwrap(), []);
}

#[tokio::test]
async fn instead_the_text_goes_when_the_voice_cannot() {
    let s = setup(TtsMode::Instead).await;
    let outbox = s.outbox(CancellationToken::new());
    // The endpoint fails: the text goes as usual.
    s.speech.fail_with(Some(500));
    s.deliver(&outbox, "first", None).await;
    assert_eq!(s.channel.calls(), ["send first"]);
    // The platform refuses the voice note, and the audio as a document: the text goes.
    s.speech.fail_with(None);
    s.channel.refuse_files([
        ChannelError::Rejected("VOICE_MESSAGES_FORBIDDEN".into()),
        ChannelError::Rejected("still no".into()),
    ]);
    let id = s.deliver(&outbox, "second", None).await;
    assert_eq!(
        s.channel.calls()[1..],
        [
            format!("file reply-{id}.ogg #{id}.7.v"),
            format!("file reply-{id}.ogg as document #{id}.7.vd"),
            "send second".to_owned(),
        ]
    );
    // A channel without files: the text.
    s.channel
        .refuse_files([ChannelError::Unsupported("sending files")]);
    s.deliver(&outbox, "third", None).await;
    assert_eq!(s.channel.calls().last().unwrap(), "send third");
    assert!(s.channel.uploads().is_empty());
    assert_eq!(s.store.undelivered().unwrap(), []);
}

#[tokio::test]
async fn a_voice_note_refused_for_now_is_sent_once_after_the_retry() {
    let s = setup(TtsMode::Beside).await;
    let outbox = s.outbox(CancellationToken::new());
    s.channel
        .refuse_files([ChannelError::Transport("502".into())]);
    let id = s.deliver(&outbox, "Hello", None).await;
    let voice = format!("file reply-{id}.ogg #{id}.7.v");
    assert_eq!(
        s.channel.calls(),
        ["send Hello".to_owned(), voice.clone(), voice]
    );
    assert_eq!(s.channel.uploads().len(), 1);
    assert_eq!(s.speech.requests().len(), 1, "spoken once");
}

#[tokio::test]
async fn a_voice_note_failing_for_now_again_and_again_is_given_up_for_the_text() {
    let s = setup(TtsMode::Instead).await;
    let outbox = s.outbox(CancellationToken::new());
    let failing = || ChannelError::Transport("502".into());
    s.channel.refuse_files([failing(), failing(), failing()]);
    let id = s.deliver(&outbox, "Hello", None).await;
    let voice = format!("file reply-{id}.ogg #{id}.7.v");
    assert_eq!(
        s.channel.calls(),
        [voice.clone(), voice.clone(), voice, "send Hello".to_owned()]
    );
    assert_eq!(s.store.undelivered().unwrap(), []);
}

#[tokio::test]
async fn a_restart_takes_the_voice_note_back_speaks_again_and_sends_it_once() {
    let s = setup(TtsMode::Instead).await;
    std::fs::write(s.ws.join("out/a.txt"), b"A").unwrap();
    let text = format!("Hello\nMEDIA:{}", s.ws.join("out/a.txt").display());
    // The voice note goes; the file after it fails for now and the process stops meanwhile.
    let stop = CancellationToken::new();
    let (channel, cut) = (s.channel.clone(), stop.clone());
    s.channel.on_next_file(move || {
        let channel2 = channel.clone();
        channel.on_next_file(move || {
            channel2.refuse_files([ChannelError::Transport("502".into())]);
            cut.cancel();
        });
    });
    let id = s.deliver(&s.outbox(stop), &text, None).await;
    let voice = format!("file reply-{id}.ogg #{id}.7.v");
    assert_eq!(
        s.channel.calls(),
        [voice.clone(), format!("file a.txt #{id}.7.f0")]
    );

    // The next start: what the cut-short delivery sent is taken back, then all of it goes
    // once, spoken again (a file left in the workspace is never trusted).
    let journal = s.store.journal("run-1").unwrap();
    let entry = s.store.undelivered().unwrap().pop().unwrap();
    let outbox = s.outbox(CancellationToken::new());
    outbox.submit(Delivery::recorded(entry, journal));
    outbox.idle().await;
    assert_eq!(
        s.channel.calls()[2..],
        [
            "delete s1".to_owned(),
            voice,
            format!("file a.txt #{id}.7.f0"),
        ]
    );
    assert_eq!(s.speech.requests().len(), 2, "spoken once per delivery");
    assert_eq!(s.store.undelivered().unwrap(), []);
    s.audio_removed(id).await;
}
