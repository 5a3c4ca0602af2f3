//! End-to-end voice replies (docs/voice.md) over the fake Telegram and the kit's fake speech
//! endpoint: `/tts on` in a DM, and the next answers come as text and a voice note
//! (`sendVoice`, the endpoint's OGG bytes), also after a restart; with `mode = "instead"` as a
//! voice note alone; a failing endpoint still delivers the text; without `[tts] url`, `/tts on`
//! is refused.

use crate::common;

use chela_testkit::FakeSpeech;
use common::telegram::{TgConfig, TgSetup, dm};

/// A Telegram setup whose `[tts]` points at `speech`, with `mode`.
async fn setup(speech: &FakeSpeech, mode: &str) -> TgSetup {
    let tables = format!(
        "[tts]\nurl = \"{}\"\napi_key = \"sk-voice\"\nmode = \"{mode}\"\n",
        speech.base_url()
    );
    TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &tables,
        ..TgConfig::default()
    })
    .await
}

/// Ann sends `text` and the gateway on `s` answers `ok: <text>` (a message or a voice note);
/// waits until `done` holds.
async fn ask(
    s: &TgSetup,
    gw: &mut common::telegram::Gateway,
    text: &str,
    done: impl FnMut(&TgSetup) -> bool,
) {
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(chat, ann, text);
    gw.wait(s, &format!("the answer to {text:?}"), done).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_tts_on_answers_come_as_text_and_a_voice_note_also_after_a_restart() {
    let speech = FakeSpeech::start().await.unwrap();
    let s = setup(&speech, "beside").await;
    let mut gw = s.gateway();
    ask(&s, &mut gw, "/tts on", |s| !s.texts(42).is_empty()).await;
    assert!(
        s.texts(42)[0].starts_with("Voice replies: on"),
        "{:?}",
        s.texts(42)
    );
    ask(&s, &mut gw, "hello there", |s| s.tg.uploads(42).len() == 1).await;
    gw.stop().await;

    let texts = s.texts(42);
    assert_eq!(texts[1..], ["ok: hello there"], "{texts:#?}");
    let uploads = s.tg.uploads(42);
    assert_eq!(uploads[0].method, "sendvoice");
    assert_eq!(uploads[0].bytes, FakeSpeech::AUDIO);
    assert_eq!(uploads[0].caption, None);
    let voice_id = uploads[0].message_id;
    let text_id = s.sent(42)[1].message_id;
    assert!(text_id < voice_id, "the voice note follows the text");
    let asked = speech.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].input(), "ok: hello there");
    assert_eq!(asked[0].body["response_format"], "opus");
    assert_eq!(asked[0].authorization.as_deref(), Some("Bearer sk-voice"));

    // The choice is kept across a restart.
    let mut gw = s.gateway();
    ask(&s, &mut gw, "again", |s| s.tg.uploads(42).len() == 2).await;
    gw.stop().await;
    assert_eq!(s.texts(42).last().map(String::as_str), Some("ok: again"));
    assert_eq!(speech.requests().len(), 2, "each answer spoken once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mode_instead_the_answer_is_a_voice_note_alone() {
    let speech = FakeSpeech::start().await.unwrap();
    let s = setup(&speech, "instead").await;
    let mut gw = s.gateway();
    ask(&s, &mut gw, "/tts on", |s| !s.texts(42).is_empty()).await;
    ask(&s, &mut gw, "hello there", |s| !s.tg.uploads(42).is_empty()).await;
    // The outbox lets the conversation go once the final is delivered (the preview deleted).
    ask(&s, &mut gw, "/tts", |s| s.texts(42).len() == 2).await;
    gw.stop().await;

    let texts = s.texts(42);
    assert!(
        texts.iter().all(|t| !t.contains("ok: hello")),
        "no text answer: {texts:#?}"
    );
    assert!(texts[1].starts_with("Voice replies: on"), "{texts:#?}");
    let uploads = s.tg.uploads(42);
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    assert_eq!(uploads[0].method, "sendvoice");
    assert_eq!(speech.requests()[0].input(), "ok: hello there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_speech_endpoint_still_delivers_the_text() {
    let speech = FakeSpeech::start().await.unwrap();
    speech.fail_with(Some(500));
    let s = setup(&speech, "instead").await;
    let mut gw = s.gateway();
    ask(&s, &mut gw, "/tts on", |s| !s.texts(42).is_empty()).await;
    ask(&s, &mut gw, "hello there", |s| {
        s.texts(42).iter().any(|t| t == "ok: hello there")
    })
    .await;
    gw.stop().await;
    assert!(s.tg.uploads(42).is_empty());
    assert_eq!(speech.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_speech_url_tts_on_is_refused() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    ask(&s, &mut gw, "/tts on", |s| !s.texts(42).is_empty()).await;
    ask(&s, &mut gw, "hello", |s| s.texts(42).len() == 2).await;
    gw.stop().await;
    let texts = s.texts(42);
    assert!(texts[0].contains("no [tts] url"), "{texts:#?}");
    assert_eq!(texts[1], "ok: hello");
    assert!(s.tg.uploads(42).is_empty());
}
