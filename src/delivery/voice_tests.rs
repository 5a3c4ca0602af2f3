//! Voice notes against the kit's fake speech endpoint: which finals are spoken, what the
//! endpoint is asked, where the audio is kept, a planted file never trusted, and its removal.
//! Real sockets, so the clock is not paused (nothing here measures time).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chela_testkit::FakeSpeech;

use super::*;
use crate::config::TtsConfig;

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    store: Store,
    speech: FakeSpeech,
    voices: Arc<Voices>,
}

async fn setup(config: impl FnOnce(&mut TtsConfig)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let speech = FakeSpeech::start().await.unwrap();
    let mut tts = TtsConfig {
        url: speech.base_url(),
        api_key: "sk-voice".into(),
        ..TtsConfig::default()
    };
    config(&mut tts);
    let voices = Voices::from_config(&tts).unwrap();
    let store = Store::temporary().unwrap();
    super::super::tts_choice::choose(&store, "on", Some(true)).unwrap();
    Setup {
        _dir: dir,
        ws,
        store,
        speech,
        voices,
    }
}

impl Setup {
    async fn note(&self, key: &str, id: u64, text: &str) -> Option<VoiceNote> {
        let spoken = Spoken {
            id,
            session_key: key,
            text,
            workspace: &self.ws,
        };
        let cancel = CancellationToken::new();
        self.voices.note(&self.store, spoken, &cancel).await
    }
}

#[tokio::test]
async fn a_final_is_spoken_as_plain_text_and_kept_until_discarded() {
    let s = setup(|_| {}).await;
    let note = s
        .note("on", 7, "It is **warm** in [Paris](https://p.fr).")
        .await;
    let note = note.expect("a voice note");
    assert_eq!(note.path, "media/tts/reply-7.ogg");
    assert!(!note.instead);
    assert_eq!(
        std::fs::read(s.ws.join(&note.path)).unwrap(),
        FakeSpeech::AUDIO
    );
    let requests = s.speech.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].body,
        serde_json::json!({
            "model": "gpt-4o-mini-tts",
            "voice": "alloy",
            "input": "It is warm in Paris.",
            "response_format": "opus",
        })
    );
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-voice")
    );
    // A file left at that path is never trusted: the final is spoken again.
    std::fs::write(s.ws.join(&note.path), b"OggS planted by another session").unwrap();
    assert!(s.note("on", 7, "It is warm.").await.is_some());
    assert_eq!(s.speech.requests().len(), 2);
    assert_eq!(
        std::fs::read(s.ws.join(&note.path)).unwrap(),
        FakeSpeech::AUDIO
    );
    discard(s.ws.clone(), 7).await;
    assert!(!s.ws.join(&note.path).exists());
    discard(s.ws.clone(), 8).await;
}

#[tokio::test]
async fn only_finals_worth_speaking_of_sessions_with_voice_replies_on_are_spoken() {
    let s = setup(|tts| tts.max_chars = 10).await;
    assert_eq!(s.note("off", 1, "short").await, None, "not turned on");
    assert_eq!(s.note("on", 2, "NO_REPLY").await, None);
    assert_eq!(s.note("on", 3, "```\ncode\n```").await, None);
    assert_eq!(s.note("on", 4, "longer than ten").await, None);
    assert!(s.speech.requests().is_empty());
    assert!(s.note("on", 5, "ten chars!").await.is_some());
}

#[tokio::test]
async fn the_default_and_the_mode_come_from_the_config() {
    let s = setup(|tts| {
        tts.default = TtsDefault::On;
        tts.mode = TtsMode::Instead;
    })
    .await;
    let note = s.note("never-chose", 1, "hello").await.unwrap();
    assert!(note.instead);
    super::super::tts_choice::choose(&s.store, "chose-off", Some(false)).unwrap();
    assert_eq!(s.note("chose-off", 2, "hello").await, None);
}

#[tokio::test]
async fn a_failing_endpoint_leaves_no_note_and_no_file() {
    let s = setup(|_| {}).await;
    s.speech.fail_with(Some(500));
    assert_eq!(s.note("on", 1, "hello").await, None);
    assert_eq!(s.speech.requests().len(), 1);
    assert!(!s.ws.join("media/tts/reply-1.ogg").exists());
    // Off without a URL.
    assert!(Voices::from_config(&TtsConfig::default()).is_none());
}

#[tokio::test]
async fn an_answer_that_is_not_audio_leaves_no_note() {
    let s = setup(|_| {}).await;
    // A 200 whose body is a JSON error (as a proxy's page would be): no voice note.
    s.speech.fail_with(Some(200));
    assert_eq!(s.note("on", 1, "hello").await, None);
    assert!(!s.ws.join("media/tts/reply-1.ogg").exists());
}

#[tokio::test]
async fn a_folder_swapped_for_a_link_is_refused() {
    let s = setup(|_| {}).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(s.ws.join("media")).unwrap();
    std::os::unix::fs::symlink(outside.path(), s.ws.join("media/tts")).unwrap();
    assert_eq!(s.note("on", 1, "hello").await, None);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}
