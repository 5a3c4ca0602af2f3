use super::*;

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
    let url = serve(vec![7u8; 5000]).await;
    let dest = dir.path().join("a/b/file.bin");
    assert_eq!(download(&url, &dest, 5000).await.unwrap(), 5000);
    assert_eq!(std::fs::read(&dest).unwrap().len(), 5000);
    let small = dir.path().join("small.bin");
    let err = download(&url, &small, 4999).await.unwrap_err();
    assert!(matches!(err, FetchError::TooBig(_)), "{err:?}");
    assert!(!small.exists());
    assert!(!dir.path().join("small.bin.part").exists());
}
