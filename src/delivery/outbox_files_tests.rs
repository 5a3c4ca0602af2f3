//! The outbox worker with files: each upload opens its file again (a file swapped for a
//! symlink between two attempts is never read), a final's file that cannot go becomes a note
//! while its text and other files are delivered, and a `message`-tool record keeps its
//! progress durably, so a restart sends only what did not go.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use super::*;
use crate::test_channel::{TestChannel, direct_chat};

struct Setup {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    secret: std::path::PathBuf,
    channel: Arc<TestChannel>,
    store: Store,
    outbox: Outbox,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, b"SECRET").unwrap();
    let ws = std::fs::canonicalize(ws).unwrap();
    let channel = TestChannel::new(1_000);
    let store = Store::temporary().unwrap();
    let channels = HashMap::from([("test".to_owned(), channel.clone() as Arc<dyn Channel>)]);
    let files = FilePolicy::new(ws.clone(), Vec::new());
    let outbox = Outbox::new(
        store.clone(),
        channels,
        Duration::from_secs(600),
        CancellationToken::new(),
        files,
        None,
    );
    Setup {
        _dir: dir,
        ws,
        secret,
        channel,
        store,
        outbox,
    }
}

impl Setup {
    /// Writes `name` into `out/` of the workspace; its file line.
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.ws.join("out").join(name), bytes).unwrap();
        format!("MEDIA:{}", self.ws.join("out").join(name).display())
    }

    /// Records `text` (of run `run`, or of the `message` tool) and hands it over; its id and
    /// the receiver of its outcome.
    async fn submit(
        &self,
        text: &str,
        run: Option<&str>,
    ) -> (u64, oneshot::Receiver<Result<(), String>>) {
        let created_ms = now_ms();
        let id = self
            .store
            .record_final("k", &direct_chat(), text, created_ms)
            .await
            .unwrap();
        let outcome = self.outbox.submit_watched(Delivery {
            session_key: "agent:main:main".to_owned(),
            id,
            to: direct_chat(),
            text: text.to_owned(),
            created_ms,
            run_id: run.map(str::to_owned),
            stream: None,
            take_back: None,
        });
        (id, outcome)
    }
}

#[tokio::test(start_paused = true)]
async fn a_file_swapped_for_a_symlink_between_two_attempts_is_never_read() {
    let s = setup();
    let line = s.file("a.png", b"PNG");
    let (id, outcome) = s.submit(&format!("look\n{line}"), None).await;
    // The first upload fails with a 5xx; meanwhile the agent swaps the file for a symlink
    // to a file outside the workspace.
    s.channel
        .refuse_files([ChannelError::Transport("502".into())]);
    let (path, secret) = (s.ws.join("out/a.png"), s.secret.clone());
    s.channel.on_next_file(move || {
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&secret, &path).unwrap();
    });
    s.outbox.idle().await;

    let why = outcome.await.unwrap().unwrap_err();
    assert!(why.contains("symlink"), "{why}");
    assert!(s.channel.uploads().is_empty(), "{:?}", s.channel.uploads());
    let dead: Vec<u64> = s
        .store
        .dead_letters()
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(dead, [id]);
}

#[tokio::test(start_paused = true)]
async fn a_finals_file_refused_for_good_is_a_note_and_the_rest_is_delivered() {
    let s = setup();
    let picture = s.file("a.png", b"PNG");
    let good = s.file("b.pdf", b"PDF");
    let gone = format!("MEDIA:{}", s.ws.join("out/gone.pdf").display());
    let text = format!("Here\n{picture}\n{gone}\n{good}");
    // sendPhoto refused for good, and then as a document too.
    s.channel.refuse_files([
        ChannelError::Rejected("PHOTO_INVALID_DIMENSIONS".into()),
        ChannelError::Rejected("still refused".into()),
    ]);
    let (id, outcome) = s.submit(&text, Some("run-1")).await;
    s.outbox.idle().await;

    outcome.await.unwrap().unwrap();
    assert!(s.store.dead_letters().unwrap().is_empty());
    let calls = s.channel.calls();
    assert_eq!(
        calls[0],
        format!("file a.png [Here] #{id}.7.f0"),
        "{calls:#?}"
    );
    assert_eq!(
        calls[1],
        format!("file a.png as document [Here] #{id}.7.f0d")
    );
    assert_eq!(calls[2], "send Here", "the text that rode on it goes alone");
    assert_eq!(calls[3], format!("file b.pdf #{id}.7.f2"), "{calls:#?}");
    assert!(
        calls[4].starts_with("send (file not sent: a.png: "),
        "{calls:#?}"
    );
    assert!(
        calls[4].contains("\n(file not sent: gone.pdf: "),
        "{calls:#?}"
    );
    assert!(calls[4].contains("does not exist"), "{calls:#?}");
    assert_eq!(calls.len(), 5, "{calls:#?}");
    assert_eq!(s.channel.uploads(), [("b.pdf".to_owned(), b"PDF".to_vec())]);
}

#[tokio::test(start_paused = true)]
async fn a_message_record_notes_each_file_and_resumes_after_what_it_noted() {
    let s = setup();
    let text = format!(
        "notes\n{}\n{}",
        s.file("a.txt", b"A"),
        s.file("b.txt", b"B")
    );
    // While the second file goes, the first one (with the caption) is noted durably.
    let (id, outcome) = s.submit(&text, None).await;
    let seen = Arc::new(Mutex::new(None));
    let (store, key, into) = (s.store.clone(), files_journal(id), seen.clone());
    let channel = s.channel.clone();
    // Installed at the first file's send, run at the second's.
    s.channel.on_next_file(move || {
        channel.on_next_file(move || {
            let noted = store.journal(&key).unwrap().map(|j| j.messages);
            *into.lock().unwrap() = Some(noted);
        });
    });
    s.outbox.idle().await;
    outcome.await.unwrap().unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        Some(Some(vec!["f0".to_owned()])),
        "the first file was noted before the second went"
    );
    assert_eq!(
        s.channel.calls(),
        [
            format!("file a.txt [notes] #{id}.7.f0"),
            format!("file b.txt #{id}.7.f1")
        ]
    );
    assert_eq!(
        s.store.journal(&files_journal(id)).unwrap(),
        None,
        "forgotten"
    );

    // A record whose first file went before a restart: only the second one goes now.
    let channel_calls = s.channel.calls().len();
    let created_ms = now_ms();
    let id = s
        .store
        .record_final("k", &direct_chat(), &text, created_ms)
        .await
        .unwrap();
    s.store
        .journal_sent(&files_journal(id), &direct_chat(), "f0", true)
        .await
        .unwrap();
    let entry = s.store.undelivered().unwrap().pop().unwrap();
    s.outbox.submit(Delivery::recorded(entry, None));
    s.outbox.idle().await;
    let calls = s.channel.calls();
    assert_eq!(
        calls[channel_calls..],
        [format!("file b.txt #{id}.7.f1")],
        "neither the caption nor the first file again"
    );
}
