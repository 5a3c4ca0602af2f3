//! End-to-end, media out (docs/media.md): the agent (the fake model calling the
//! `message` tool with `attachments`) sends files it made, and they arrive once with their
//! bytes: as a photo and a document on Telegram, also when the gateway is killed (-9) while
//! the upload is still being retried and started again; a path outside the workspace is
//! refused and nothing is sent; on Discord, a picture a user sent comes back as an attachment.

use crate::common;

use chela_testkit::discord::{AttachmentSpec, ChannelSpec, MessageOptions, UserSpec as DcUser};
use chela_testkit::telegram::Faults;
use common::discord::DcSetup;
use common::telegram::{TgSetup, dm};
use serde_json::json;

/// Some bytes standing for a picture.
fn picture() -> Vec<u8> {
    (0..5000u32).map(|i| (i * 7 % 251) as u8).collect()
}

/// The fake model's directive: `write` each file, then `message` them with `caption`.
fn make_and_send(files: &[(&str, &str)], caption: &str) -> String {
    let mut calls: Vec<serde_json::Value> = files
        .iter()
        .map(|(path, content)| json!({"name": "write", "arguments": {"path": path, "content": content}}))
        .collect();
    let paths: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    calls.push(json!({"name": "message", "arguments": {"text": caption, "attachments": paths}}));
    format!("tools {}", serde_json::Value::Array(calls))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_the_agent_made_arrive_once_as_photo_and_document_with_their_bytes() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let directive = make_and_send(
        &[
            ("out/chart.png", "PNG-BYTES"),
            ("out/report.txt", "the report"),
        ],
        "here you go",
    );
    s.tg.user_sends(chat, ann, &directive);
    gw.wait(&s, "the files and the final answer", |s| {
        s.tg.uploads(42).len() >= 2 && !s.texts(42).is_empty()
    })
    .await;
    gw.stop().await;

    let uploads = s.tg.uploads(42);
    assert_eq!(uploads.len(), 2, "{uploads:#?}");
    assert_eq!(uploads[0].method, "sendphoto");
    assert_eq!(uploads[0].file_name, "chart.png");
    assert_eq!(uploads[0].bytes, b"PNG-BYTES");
    assert_eq!(uploads[0].mime_type.as_deref(), Some("image/png"));
    assert_eq!(
        uploads[0].caption.as_deref(),
        Some("here you go"),
        "a short text is the first file's caption"
    );
    assert_eq!(uploads[1].method, "senddocument");
    assert_eq!(uploads[1].bytes, b"the report");
    assert_eq!(uploads[1].caption, None);
    // The tool told the model it went; the caption is not said again as text.
    let texts = s.texts(42);
    assert_eq!(texts.len(), 1, "{texts:#?}");
    assert!(texts[0].starts_with("done: sent 2 file(s)"), "{texts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_upload_was_cut_by_kill_9_arrives_once_after_restart() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    // Every upload fails (5xx) until the restart: the record waits in the outbox.
    s.tg.inject_faults(Faults {
        seed: 7,
        internal_error: 1.0,
        ..Faults::default()
    });
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let directive = make_and_send(&[("out/notes.txt", "made by the agent")], "notes");
    s.tg.user_sends(chat, ann, &directive);
    gw.wait(&s, "a first upload attempt", |s| {
        s.tg.call_count("senddocument") >= 1
    })
    .await;
    gw.kill().await;
    assert!(s.tg.uploads(42).is_empty());

    s.tg.inject_faults(Faults::default());
    let mut gw = s.gateway();
    gw.wait(&s, "the file and the final answer", |s| {
        !s.tg.uploads(42).is_empty() && !s.texts(42).is_empty()
    })
    .await;
    gw.stop().await;

    let uploads = s.tg.uploads(42);
    assert_eq!(uploads.len(), 1, "sent once: {uploads:#?}");
    assert_eq!(uploads[0].bytes, b"made by the agent");
    assert_eq!(uploads[0].caption.as_deref(), Some("notes"));
    let texts = s.texts(42);
    assert_eq!(texts.len(), 1, "{texts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_sent_before_kill_9_is_not_sent_again_after_restart() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    // The first file goes; the second one fails (5xx) until the restart.
    s.tg.fail_uploads_of(&["b.txt"]);
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let directive = make_and_send(&[("out/a.txt", "first"), ("out/b.txt", "second")], "notes");
    s.tg.user_sends(chat, ann, &directive);
    gw.wait(&s, "the first file, and an attempt at the second", |s| {
        s.tg.uploads(42).len() == 1 && s.tg.call_count("senddocument") >= 2
    })
    .await;
    gw.kill().await;

    s.tg.fail_uploads_of(&[]);
    let mut gw = s.gateway();
    gw.wait(&s, "the second file and the final answer", |s| {
        s.tg.uploads(42).len() >= 2 && !s.texts(42).is_empty()
    })
    .await;
    gw.stop().await;

    let uploads = s.tg.uploads(42);
    let sent: Vec<(&str, &[u8])> = uploads
        .iter()
        .map(|u| (u.file_name.as_str(), u.bytes.as_slice()))
        .collect();
    assert_eq!(
        sent,
        [("a.txt", &b"first"[..]), ("b.txt", &b"second"[..])],
        "each file once: {uploads:#?}"
    );
    assert_eq!(uploads[0].caption.as_deref(), Some("notes"));
    assert_eq!(
        uploads[1].caption, None,
        "the caption went once, with the first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_outside_the_workspace_is_refused_and_nothing_is_sent() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    std::fs::write(s.setup.path("secret.txt"), "not for the chat").unwrap();
    let config = s.setup.config();
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let call = json!({"text": "x", "attachments": ["../secret.txt"]});
    s.tg.user_sends(chat.clone(), ann.clone(), &format!("tool message {call}"));
    gw.wait(&s, "the first answer", |s| !s.texts(42).is_empty())
        .await;
    let call = json!({"text": "x", "attachments": [config.display().to_string()]});
    s.tg.user_sends(chat, ann, &format!("tool message {call}"));
    // The final answer, not a preview of it.
    gw.wait(&s, "the second answer", |s| {
        s.texts(42)
            .get(1)
            .is_some_and(|t| t.contains("use a path inside it"))
    })
    .await;
    gw.stop().await;

    assert!(s.tg.uploads(42).is_empty());
    assert_eq!(s.tg.call_count("senddocument"), 0);
    let texts = s.texts(42);
    for text in &texts {
        assert!(text.contains("outside the workspace"), "{texts:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_sent_on_discord_comes_back_as_an_attachment() {
    const DM: u64 = 4_000_001;
    let s = DcSetup::open().await;
    let mut gw = s.gateway().await;
    let ann = DcUser::new(7201, "ann");
    let options = MessageOptions {
        attachments: vec![AttachmentSpec::served("cat.png", "image/png", picture())],
        ..MessageOptions::default()
    };
    s.dc.user_sends_with(ChannelSpec::dm(DM), ann.clone(), "look", options);
    gw.wait(&s, "the first answer", |s| !s.texts(DM).is_empty())
        .await;
    // The picture as chela saved it in the workspace.
    let ws = s.setup.path("ws");
    let folder = std::fs::read_dir(ws.join("media"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let saved = std::fs::read_dir(folder.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let relative = saved
        .path()
        .strip_prefix(&ws)
        .unwrap()
        .display()
        .to_string();
    let call = json!({"text": "your cat", "attachments": [relative]});
    s.dc.user_sends(ChannelSpec::dm(DM), ann, &format!("tool message {call}"));
    gw.wait(&s, "the picture back", |s| {
        s.dc.sent(DM).iter().any(|m| !m.attachments.is_empty())
    })
    .await;
    gw.wait(&s, "the final answer", |s| {
        s.texts(DM).iter().any(|t| t.starts_with("done:"))
    })
    .await;
    gw.stop().await;

    let with_files: Vec<_> =
        s.dc.sent(DM)
            .into_iter()
            .filter(|m| !m.attachments.is_empty())
            .collect();
    assert_eq!(with_files.len(), 1, "{with_files:#?}");
    let message = &with_files[0];
    assert_eq!(message.attachments.len(), 1);
    assert!(message.attachments[0].ends_with("cat.png"), "{message:#?}");
    assert_eq!(message.content, "your cat");
    assert!(message.nonce.is_some(), "sent with a nonce");
    assert_eq!(s.dc.attachment_bytes(DM, message.id), vec![picture()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_answer_carries_a_file_on_a_media_line() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let out = s.setup.path("ws").join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("plot.png"), picture()).unwrap();
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    // The fake model echoes this text as its answer: the file line is the reply's.
    s.tg.user_sends(
        chat,
        ann,
        "Your plot\nMEDIA:out/plot.png\nMEDIA:../nope.png",
    );
    gw.wait(&s, "the picture", |s| !s.tg.uploads(42).is_empty())
        .await;
    gw.stop().await;

    let uploads = s.tg.uploads(42);
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    assert_eq!(uploads[0].method, "sendphoto");
    assert_eq!(uploads[0].bytes, picture());
    // The text went with it (as its caption, or as a message before it), without the file
    // lines; the refused one is noted.
    let mut said: Vec<String> = s.texts(42);
    said.extend(uploads[0].caption.clone());
    let all = said.join("\n");
    assert!(all.contains("Your plot"), "{all}");
    assert!(all.contains("file not sent"), "{all}");
    let messages = s.tg.messages(42);
    let last_text = messages
        .iter()
        .rev()
        .find_map(|m| m["text"].as_str().or(m["caption"].as_str()))
        .unwrap();
    assert!(!last_text.contains("MEDIA:"), "{last_text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_the_configured_discord_limit_is_refused_and_nothing_is_uploaded() {
    const DM: u64 = 4_000_002;
    let s = DcSetup::with(common::discord::DcConfig {
        discord: "dm_policy = \"open\"\nupload_mb = 1",
        ..Default::default()
    })
    .await;
    let out = s.setup.path("ws").join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("big.bin"), vec![7u8; 1024 * 1024 + 1]).unwrap();
    std::fs::write(out.join("small.bin"), vec![7u8; 1024]).unwrap();
    let mut gw = s.gateway().await;
    let ann = DcUser::new(7202, "ann");
    let big = json!({"text": "big", "attachments": ["out/big.bin"]});
    s.dc.user_sends(
        ChannelSpec::dm(DM),
        ann.clone(),
        &format!("tool message {big}"),
    );
    gw.wait(&s, "the refusal", |s| {
        s.texts(DM).iter().any(|t| t.starts_with("done:"))
    })
    .await;
    let small = json!({"text": "small", "attachments": ["out/small.bin"]});
    s.dc.user_sends(ChannelSpec::dm(DM), ann, &format!("tool message {small}"));
    gw.wait(&s, "the small file", |s| {
        s.dc.sent(DM).iter().any(|m| !m.attachments.is_empty())
    })
    .await;
    gw.stop().await;

    let texts = s.texts(DM);
    assert!(
        texts.iter().any(|t| t.contains("takes files up to 1 MB")),
        "{texts:#?}"
    );
    let uploaded: Vec<_> =
        s.dc.sent(DM)
            .into_iter()
            .flat_map(|m| m.attachments)
            .collect();
    assert_eq!(uploaded.len(), 1, "only the small file: {uploaded:?}");
    assert!(uploaded[0].ends_with("small.bin"), "{uploaded:?}");
}
