//! End-to-end, a store that lost durable writes (an older copy of its folder put back): the
//! gateway refuses to start, saying so and naming `--accept-store-rollback`; with the flag it
//! starts and answers only new messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

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
