//! End-to-end, a store that lost durable writes (an older copy of its folder put back): the
//! gateway refuses to start, saying so and naming `--accept-store-rollback`; with the flag it
//! starts and answers only new messages.

use crate::common;

use std::path::Path;

use chela_testkit::{ChatSpec, UserSpec};
use common::telegram::{TgSetup, dm};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_put_back_from_an_older_copy_is_refused_until_accepted() {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let (chat, ann) = dm(42, "Ann");
    let mut gw = s.gateway();
    s.tg.user_sends(chat.clone(), ann.clone(), "one");
    gw.wait(&s, "the first answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: one")
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;
    let data = s.setup.path("data");
    let old = s.setup.path("data-old");
    copy_dir(&data, &old);

    let mut gw = s.gateway();
    s.tg.user_sends(chat.clone(), ann.clone(), "two");
    gw.wait(&s, "the second answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: two")
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;

    // The older copy comes back: everything since "one" is lost.
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::rename(&old, &data).unwrap();
    let sent_before = s.texts(42).len();
    let out = s.setup.run(&["gateway"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the gateway must refuse: {stderr}");
    assert!(
        stderr.contains("rolled back") && stderr.contains("--accept-store-rollback"),
        "{stderr}"
    );
    assert_eq!(s.texts(42).len(), sent_before, "nothing sent");
    assert_eq!(s.asked(), vec!["one".to_string(), "two".to_string()]);

    let mut gw = s.gateway_with(&["--accept-store-rollback"]);
    s.tg.user_sends(chat, ann, "three");
    gw.wait(&s, "the third answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: three")
    })
    .await;
    gw.stop().await;
    assert_eq!(
        s.asked(),
        vec!["one".to_string(), "two".to_string(), "three".to_string()],
        "no old message was answered again"
    );
}

/// Writes `bytes` into `file` at offset `at` (a disk or a person damaging the store).
fn scribble(file: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

/// A small seeded generator (xorshift64), so the damage is the same on every run.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A gateway that answered "one" to Ann (chat 42) and was stopped: its store is sound.
async fn answered_once() -> TgSetup {
    let s = TgSetup::new("allow_from = [\"42\"]").await;
    let (chat, ann) = dm(42, "Ann");
    let mut gw = s.gateway();
    s.tg.user_sends(chat, ann, "one");
    gw.wait(&s, "the first answer", |s| {
        s.texts(42).iter().any(|t| t == "ok: one")
    })
    .await;
    s.wait_consumed(&mut gw).await;
    gw.stop().await;
    s
}

/// Asserts that `stderr` names the damaged store file and what to do, and shows no panic.
fn names_the_damage(stderr: &str, file: &Path) {
    assert!(
        stderr.contains(&format!("the store {} is damaged", file.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("restore the folder") && stderr.contains("from a backup"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_scribbled_at_4_kib_is_named_at_start_and_by_store_check() {
    let s = answered_once().await;
    let file = s
        .setup
        .path("data")
        .canonicalize()
        .unwrap()
        .join("chela.redb");
    let (ok, text) = s.cli(&["store", "check"]).await;
    assert!(ok, "{text}");
    assert!(
        text.contains("ok: the store in") && text.contains("is sound"),
        "{text}"
    );
    assert!(text.contains("sessions: 1 records"), "{text}");

    scribble(&file, 4096, &[0xa5; 16]);
    let asked = s.asked().len();
    let out = s.setup.run(&["gateway"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    names_the_damage(&stderr, &file);
    assert_eq!(s.asked().len(), asked, "the model was not called");

    let out = s.setup.run(&["store", "check"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    names_the_damage(&stderr, &file);
}

/// 40 scribbles of 16 random bytes at random places, for each of a few seeds, on a copy of
/// a sound store: the gateway either refuses to start naming the store (exit 2), or the
/// damage missed everything it holds and it answers. Never a panic, never a gateway that
/// runs without answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_scribbles_end_in_a_named_refusal_or_a_working_gateway() {
    let s = answered_once().await;
    let data = s.setup.path("data");
    let file = data.canonicalize().unwrap().join("chela.redb");
    let mark = s.setup.path("data.highwater");
    let (good, good_mark) = (s.setup.path("data-good"), s.setup.path("good.highwater"));
    copy_dir(&data, &good);
    std::fs::copy(&mark, &good_mark).unwrap();
    let mut refused = 0;
    for seed in [7u64, 1_000_003, 424_242] {
        std::fs::remove_dir_all(&data).unwrap();
        copy_dir(&good, &data);
        std::fs::copy(&good_mark, &mark).unwrap();
        let len = std::fs::metadata(&file).unwrap().len();
        let mut rng = Seeded(seed);
        for _ in 0..40 {
            let at = rng.next() % len.saturating_sub(16);
            let bytes: Vec<u8> = (0..16).map(|_| rng.next() as u8).collect();
            scribble(&file, at, &bytes);
        }
        let text = format!("after seed {seed}");
        s.tg.user_sends(ChatSpec::private(42), UserSpec::new(42, "Ann"), &text);
        let mut child = s.setup.chela(&["gateway"]);
        child
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = child.spawn().unwrap();
        let answered = format!("ok: {text}");
        let ended = tokio::time::timeout(common::WAIT, async {
            let waited = child.wait_with_output();
            tokio::pin!(waited);
            loop {
                tokio::select! {
                    out = &mut waited => break Some(out.unwrap()),
                    _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                        if s.texts(42).contains(&answered) {
                            break None;
                        }
                    }
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: the gateway neither answered nor stopped"));
        // None: it answered (dropping the output future killed it: kill_on_drop).
        if let Some(out) = ended {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "seed {seed}: {stderr}");
            assert!(!stderr.contains("panicked"), "seed {seed}: {stderr}");
            assert!(
                stderr.contains(&file.display().to_string())
                    || stderr.contains(&data.canonicalize().unwrap().display().to_string()),
                "seed {seed}: the store is named: {stderr}"
            );
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "at least one seed damaged what the store holds"
    );
}
