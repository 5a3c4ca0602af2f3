//! End-to-end, media in (docs/media.md): a Telegram photo with a caption reaches the model as
//! an image plus the caption, and is saved in the session's media folder; a document over
//! `[media] max_mb` is refused with a short reply and the chat goes on; a Discord image
//! attachment reaches the model; a voice note is transcribed by a fake transcription endpoint.

use crate::common;

use base64::Engine;
use chela_testkit::discord::{AttachmentSpec, MessageOptions, UserSpec as DcUser};
use chela_testkit::telegram::{FileKind, FileSpec};
use common::discord::{DcSetup, text_channel};
use common::messages;
use common::telegram::{TgConfig, TgSetup, dm};
use serde_json::Value;

/// Ann's DM session key and its media folder (inside the workspace, `ws`).
const ANN_KEY: &str = "agent:main:telegram:direct:42";
const ANN_MEDIA: &str = "media/agent_main_telegram_direct_42";

/// Some bytes standing for a picture.
fn picture() -> Vec<u8> {
    (0..5000u32).map(|i| (i * 7 % 251) as u8).collect()
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("data:{mime};base64,{b64}")
}

/// The content parts of the last user message of an OpenAI request body.
fn last_user_parts(body: &Value) -> Vec<Value> {
    let last = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &last["content"] {
        Value::Array(parts) => parts.clone(),
        other => vec![serde_json::json!({"type": "text", "text": other})],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_with_a_caption_reaches_the_model_as_an_image_and_the_caption() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends_file(chat, ann, "what is this?", FileSpec::photo(picture()));
    gw.wait(&s, "an answer", |s| !s.texts(42).is_empty()).await;
    gw.stop().await;

    let calls = s.setup.model_calls();
    let parts = last_user_parts(&calls[0]);
    let text = parts[0]["text"].as_str().unwrap();
    assert!(text.starts_with("what is this?"), "{text}");
    let saved = format!("{ANN_MEDIA}/");
    assert!(
        text.contains(&saved),
        "the note names the saved file: {text}"
    );
    assert_eq!(parts[1]["type"], "image_url", "{parts:#?}");
    assert_eq!(
        parts[1]["image_url"]["url"],
        data_url("image/jpeg", &picture())
    );
    // The file is in the session's media folder, whole.
    let folder = s.setup.path("ws").join(ANN_MEDIA);
    let files: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::read(files[0].path()).unwrap(), picture());
    assert_eq!(s.tg.file_downloads(), 1);
    // The transcript keeps an image block naming the file, not its bytes.
    let entries = s.setup.export(ANN_KEY).await;
    let user = messages(&entries)
        .into_iter()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap();
    let image = user["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .cloned()
        .unwrap();
    assert_eq!(image["mimeType"], "image/jpeg");
    assert!(image["path"].as_str().unwrap().starts_with(&saved));
    assert!(image.get("data").is_none(), "{image}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_mb_document_is_refused_with_a_short_reply_and_later_messages_are_answered() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let big = FileSpec::document("big.pdf", "application/pdf", vec![0; 30 * 1024 * 1024]);
    s.tg.user_sends_file(chat.clone(), ann.clone(), "read this", big);
    gw.wait(&s, "the refusal and an answer", |s| s.texts(42).len() >= 2)
        .await;
    s.tg.user_sends(chat, ann, "hello again");
    gw.wait(&s, "the answer to the next message", |s| {
        s.asked().iter().any(|t| t == "hello again") && s.texts(42).len() >= 3
    })
    .await;
    gw.stop().await;

    let texts = s.texts(42);
    // Sent as HTML: the quotes arrive escaped.
    assert_eq!(
        texts[0],
        "The document &quot;big.pdf&quot; is too big for me (30 MB; the limit is 20 MB). I'll answer without it.",
        "{texts:#?}"
    );
    assert_eq!(s.tg.file_downloads(), 0, "never downloaded");
    let first = &s.asked()[0];
    assert!(first.starts_with("read this"), "{first}");
    assert!(
        first
            .contains("[document \"big.pdf\" (30 MB) not downloaded: bigger than the 20 MB limit]"),
        "{first}"
    );
    assert!(!s.setup.path("ws").join(ANN_MEDIA).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_image_attachment_reaches_the_model() {
    const CHAN: u64 = 1_000_777;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let options = MessageOptions {
        mentions_bot: true,
        attachments: vec![AttachmentSpec::served("cat.png", "image/png", picture())],
        ..MessageOptions::default()
    };
    s.dc.user_sends_with(
        text_channel(CHAN),
        DcUser::new(7001, "ann"),
        "look",
        options,
    );
    gw.wait(&s, "an answer", |s| !s.texts(CHAN).is_empty())
        .await;
    gw.stop().await;

    let calls = s.setup.model_calls();
    let parts = last_user_parts(&calls[0]);
    let text = parts[0]["text"].as_str().unwrap();
    assert!(text.contains("look"), "{text}");
    assert!(text.contains("cat.png"), "{text}");
    assert_eq!(
        parts[1]["image_url"]["url"],
        data_url("image/png", &picture())
    );
}

/// A fake `/v1/audio/transcriptions`: records each request body, answers `{"text": text}`.
async fn fake_transcriber(
    text: &'static str,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let bodies = seen.clone();
    let app = axum::Router::new().route(
        "/v1/audio/transcriptions",
        axum::routing::post(move |body: axum::body::Bytes| {
            let bodies = bodies.clone();
            async move {
                bodies.lock().unwrap().push(body.to_vec());
                axum::Json(serde_json::json!({ "text": text }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_and_answered() {
    let (url, seen) = fake_transcriber("buy milk on the way home").await;
    let tables =
        format!("[media]\ntranscribe_url = \"{url}\"\ntranscribe_model = \"whisper-test\"\n");
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]",
        tables: &tables,
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let voice = FileSpec {
        kind: FileKind::Voice,
        data: b"OggS fake opus".to_vec(),
        file_name: None,
        mime_type: Some("audio/ogg".into()),
    };
    s.tg.user_sends_file(chat, ann, "", voice);
    gw.wait(&s, "an answer", |s| !s.texts(42).is_empty()).await;
    gw.stop().await;

    let asked = &s.asked()[0];
    assert!(
        asked.starts_with(
            "(voice message) buy milk on the way home\n[voice message attached, saved as media/"
        ),
        "{asked}"
    );
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    let body = String::from_utf8_lossy(&bodies[0]);
    assert!(body.contains("whisper-test"), "{body}");
    assert!(body.contains("OggS fake opus"), "{body}");
    assert!(body.contains("filename=\""), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_steered_into_a_running_turn_is_downloaded_and_seen_by_the_model() {
    // Steer mode: a message arriving while a run works goes into that run.
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    s.tg.user_sends(
        chat.clone(),
        ann.clone(),
        r#"tool exec {"command": "sleep 4"}"#,
    );
    gw.wait(&s, "the first model call", |s| {
        !s.setup.model_calls().is_empty()
    })
    .await;
    s.tg.user_sends_file(chat, ann, "and this", FileSpec::photo(picture()));
    gw.wait(&s, "the answer", |s| !s.texts(42).is_empty()).await;
    gw.stop().await;

    let calls = s.setup.model_calls();
    assert_eq!(calls.len(), 2, "one run: the photo was steered into it");
    let parts = last_user_parts(&calls[1]);
    let text = parts[0]["text"].as_str().unwrap();
    assert!(text.starts_with("and this"), "{text}");
    assert!(text.contains(&format!("{ANN_MEDIA}/")), "{text}");
    assert_eq!(
        parts[1]["image_url"]["url"],
        data_url("image/jpeg", &picture())
    );
    assert_eq!(s.tg.file_downloads(), 1);
}
