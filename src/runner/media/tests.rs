use super::*;
use crate::inbound::attachments::context_line;

fn attachment(kind: AttachmentKind, name: Option<&str>, mime: Option<&str>) -> Attachment {
    Attachment {
        kind,
        file_ref: "ref".into(),
        mime_type: mime.map(str::to_owned),
        size: Some(1),
        file_name: name.map(str::to_owned),
    }
}

#[test]
fn file_names_are_safe_and_unique_per_turn_and_index() {
    let photo = attachment(AttachmentKind::Image, None, Some("image/jpeg"));
    assert_eq!(file_name(7, 0, &photo), "7-0-image.jpg");
    let doc = attachment(AttachmentKind::Document, Some("../../etc/passwd"), None);
    assert_eq!(file_name(7, 1, &doc), "7-1-_.._etc_passwd");
    let dots = attachment(
        AttachmentKind::Document,
        Some(".."),
        Some("application/pdf"),
    );
    assert_eq!(file_name(8, 0, &dots), "8-0-document.pdf");
    assert_eq!(safe_key("agent:main:direct:42"), "agent_main_direct_42");
}

#[test]
fn group_context_names_the_files_before_the_text() {
    let mut inbound = chela_channel::Inbound {
        conversation: chela_channel::Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: chela_channel::ChatKind::Group,
            chat_id: "-100".into(),
            thread_id: None,
        },
        sender: chela_channel::Sender::default(),
        message_id: "1".into(),
        text: "nice".into(),
        reply_to: None,
        mentioned: false,
        timestamp_ms: 0,
        interaction: None,
        attachments: Vec::new(),
    };
    assert_eq!(context_line(&inbound), "nice");
    inbound.attachments = vec![
        attachment(AttachmentKind::Image, None, Some("image/jpeg")),
        attachment(AttachmentKind::Document, Some("a.pdf"), None),
    ];
    assert_eq!(context_line(&inbound), "[image] [document \"a.pdf\"] nice");
    inbound.text.clear();
    assert_eq!(context_line(&inbound), "[image] [document \"a.pdf\"]");
}

#[test]
fn notes_name_the_path_and_refusals_the_limit() {
    let doc = attachment(
        AttachmentKind::Document,
        Some("report.pdf"),
        Some("application/pdf"),
    );
    assert_eq!(
        saved_note(&doc, "media/k/1-0-report.pdf", 1536),
        "[document \"report.pdf\" attached, saved as media/k/1-0-report.pdf (application/pdf, 1.5 KB)]"
    );
    let (note, reply) = refusal(&doc, &FetchError::TooBig(30 << 20), 20 << 20);
    assert_eq!(
        note,
        "[document \"report.pdf\" (30 MB) not downloaded: bigger than the 20 MB limit]"
    );
    assert_eq!(
        reply,
        "The document \"report.pdf\" is too big for me (30 MB; the limit is 20 MB). I'll answer without it."
    );
}

async fn serve(body: Vec<u8>) -> String {
    let app = axum::Router::new().route("/f", axum::routing::get(move || async move { body }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/f")
}

#[tokio::test]
async fn a_download_lands_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let url = serve(vec![7u8; 5000]).await;
    let dest = ws.join("a/b/file.bin");
    assert_eq!(download(&url, &ws, &dest, 5000).await.unwrap(), 5000);
    assert_eq!(std::fs::read(&dest).unwrap().len(), 5000);
    let small = ws.join("small.bin");
    let err = download(&url, &ws, &small, 4999).await.unwrap_err();
    assert!(matches!(err, FetchError::TooBig(_)), "{err:?}");
    assert!(!small.exists());
    assert!(!ws.join("small.bin.part").exists());
}

#[tokio::test]
async fn a_file_downloaded_before_a_restart_is_not_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let dest = ws.join("7-0-image.jpg");
    let photo = attachment(AttachmentKind::Image, None, Some("image/jpeg"));
    // No channel: a fetch would fail.
    let err = fetch_once(None, &photo, &ws, &dest, 100).await.unwrap_err();
    assert!(matches!(err, FetchError::NoChannel), "{err:?}");
    std::fs::write(&dest, b"abc").unwrap();
    assert_eq!(fetch_once(None, &photo, &ws, &dest, 100).await.unwrap(), 3);
    // The declared size is checked first, without a download.
    let mut big = photo.clone();
    big.size = Some(101);
    let err = fetch_once(None, &big, &ws, &ws.join("x"), 100)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::TooBig(101)), "{err:?}");
}

#[tokio::test]
async fn a_planted_symlink_is_never_written_through_nor_taken_for_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let dest = ws.join("1-0-image.jpg");
    // The agent guessed the next download's name: `.part` and the file itself linked out.
    std::os::unix::fs::symlink(&victim, ws.join("1-0-image.jpg.part")).unwrap();
    let url = serve(b"PNG".to_vec()).await;
    assert_eq!(download(&url, &ws, &dest, 100).await.unwrap(), 3);
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(std::fs::read(&dest).unwrap(), b"PNG");
    let linked = ws.join("2-0-image.jpg");
    std::os::unix::fs::symlink(&victim, &linked).unwrap();
    let photo = attachment(AttachmentKind::Image, None, Some("image/jpeg"));
    let err = fetch_once(None, &photo, &ws, &linked, 100)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Io(_)), "{err:?}");
}

/// The download's folder swapped for a link out after its path was resolved: refused, and
/// nothing (no folder, no `.part`, no file) is made outside. Before, `create_dir_all` and
/// the `.part` file followed the link and the rename put the download outside.
#[tokio::test]
async fn a_download_folder_swapped_for_a_link_out_makes_nothing_outside() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let dest = ws.join("media/in/1-0-image.jpg");
    std::os::unix::fs::symlink(outside.path(), ws.join("media")).unwrap();
    let url = serve(b"PNG".to_vec()).await;
    let err = download(&url, &ws, &dest, 100).await.unwrap_err();
    assert!(matches!(err, FetchError::Io(_)), "{err:?}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

/// A URL whose answer sends `first` and then nothing more, never ending.
async fn serve_stalling(first: Vec<u8>) -> String {
    let app = axum::Router::new().route(
        "/f",
        axum::routing::get(move || async move {
            let head = futures_util::stream::once(async move {
                Ok::<_, std::io::Error>(axum::body::Bytes::from(first))
            });
            let stalled = futures_util::StreamExt::chain(head, futures_util::stream::pending());
            axum::body::Body::from_stream(stalled)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/f")
}

#[tokio::test]
async fn a_stopped_download_ends_at_once_and_leaves_no_part_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let url = serve_stalling(vec![1u8; 1000]).await;
    let dest = ws.join("7-0-big.bin");
    let part = ws.join("7-0-big.bin.part");
    let cancel = CancellationToken::new();
    let download = {
        let (url, ws, dest, cancel) = (url.clone(), ws.clone(), dest.clone(), cancel.clone());
        tokio::spawn(async move { download_until(&url, None, &ws, &dest, 1 << 20, &cancel).await })
    };
    // The download is under way: its first bytes are in the .part file.
    while std::fs::metadata(&part).map_or(true, |m| m.len() == 0) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cancel.cancel();
    // A download that ignored the stop would hang: a generous guard makes that a failure.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), download).await;
    let err = ended.expect("the download ended").unwrap().unwrap_err();
    assert!(matches!(err, FetchError::Stopped), "{err:?}");
    assert!(!part.exists(), "the .part file is removed");
    assert!(!dest.exists());
    // A stopped run does not start a download at all.
    let err = download_until(&url, None, &ws, &dest, 1 << 20, &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Stopped), "{err:?}");
}
