#![allow(clippy::unwrap_used)]

use super::*;

fn setup() -> (tempfile::TempDir, FilePolicy) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("out")).unwrap();
    std::fs::create_dir_all(ws.join("data")).unwrap();
    std::fs::write(ws.join("out/chart.png"), b"png").unwrap();
    std::fs::write(ws.join("data/db"), b"store").unwrap();
    std::fs::write(dir.path().join("secret.txt"), b"secret").unwrap();
    let policy = FilePolicy::new(ws.clone(), vec![ws.join("data")]);
    (dir, policy)
}

#[test]
fn files_inside_the_workspace_go_and_nothing_else_does() {
    let (dir, policy) = setup();
    let ws = dir.path().join("ws");
    let real = policy.resolve("out/chart.png").unwrap();
    assert_eq!(
        real,
        std::fs::canonicalize(ws.join("out/chart.png")).unwrap()
    );
    // Absolute inside is fine too.
    let abs = ws.join("out/chart.png");
    assert!(policy.resolve(abs.to_str().unwrap()).is_ok());
    for refused in [
        "../secret.txt",
        "out/../../secret.txt",
        dir.path().join("secret.txt").to_str().unwrap(),
        "/etc/passwd",
    ] {
        let e = policy.resolve(refused).unwrap_err();
        assert!(matches!(e, FileRefusal::Path(_)), "{refused}: {e}");
        assert!(e.to_string().contains("outside the workspace"), "{e}");
    }
    // A symlink out of the workspace: the note names only the path asked for.
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.join("out/link")).unwrap();
    let e = policy.resolve("out/link").unwrap_err();
    assert_eq!(
        e.to_string(),
        "refused: out/link leads outside the workspace through a symlink"
    );
    let e = policy.resolve("../secret.txt").unwrap_err();
    assert_eq!(
        e.to_string(),
        "refused: ../secret.txt is outside the workspace; use a path inside it"
    );
    // chela's own files, even inside the workspace.
    let e = policy.resolve("data/db").unwrap_err();
    assert!(matches!(e, FileRefusal::Private(_)), "{e}");
    assert!(matches!(
        policy.resolve("out/none.png").unwrap_err(),
        FileRefusal::Missing(_)
    ));
    assert!(matches!(
        policy.resolve("out").unwrap_err(),
        FileRefusal::NotAFile(_)
    ));
}

#[test]
fn a_file_over_the_channels_limit_is_refused_with_both_sizes() {
    let (dir, policy) = setup();
    std::fs::write(dir.path().join("ws/out/big.bin"), vec![0u8; 3 << 20]).unwrap();
    let e = policy
        .open("out/big.bin", "discord", Some(2 << 20))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "out/big.bin is 3 MB; discord takes files up to 2 MB"
    );
    let (_, ok) = policy
        .open("out/chart.png", "discord", Some(2 << 20))
        .unwrap();
    assert_eq!(ok.kind, chela_channel::AttachmentKind::Image);
}

#[test]
fn file_lines_split_off_outside_code_fences_and_compose_back() {
    let text = "Here it is\nMEDIA:out/a.png\n  MEDIA: out/b.pdf\n```\nMEDIA:kept.txt\n```";
    let (body, paths) = split(text);
    assert_eq!(paths, vec!["out/a.png", "out/b.pdf"]);
    assert_eq!(body, "Here it is\n```\nMEDIA:kept.txt\n```");
    assert_eq!(split("no files"), ("no files".to_owned(), vec![]));
    let composed = compose("caption", &[PathBuf::from("/ws/a.png")]);
    assert_eq!(composed, "caption\nMEDIA:/ws/a.png");
    assert_eq!(
        split(&composed),
        ("caption".to_owned(), vec!["/ws/a.png".to_owned()])
    );
    assert_eq!(compose("", &[PathBuf::from("/x")]), "MEDIA:/x");
}

/// What a direct chat's final may send through `policy`.
fn final_files(policy: &FilePolicy) -> FinalFiles {
    FinalFiles {
        policy: policy.clone(),
        channel: "telegram".into(),
        max_bytes: Some(2 << 20),
        may_send: true,
        own_media: "media/me".into(),
    }
}

#[tokio::test]
async fn a_final_keeps_the_files_it_may_send_and_notes_the_others() {
    let (dir, policy) = setup();
    let text = "Done.\nMEDIA:out/chart.png\nMEDIA:../secret.txt";
    let checked = check_final(final_files(&policy), text.into()).await;
    let real = std::fs::canonicalize(dir.path().join("ws/out/chart.png")).unwrap();
    let (body, paths) = split(&checked);
    assert_eq!(paths, vec![real.display().to_string()]);
    assert!(
        body.starts_with("Done.\n(file not sent: refused: ../secret.txt"),
        "{body}"
    );
    assert_eq!(
        check_final(final_files(&policy), "plain".into()).await,
        "plain"
    );
}

#[test]
fn opening_refuses_what_was_swapped_in_after_the_check() {
    let (dir, policy) = setup();
    let ws = std::fs::canonicalize(dir.path().join("ws")).unwrap();
    // Checked as a file, then swapped for a symlink out: not followed.
    let checked = ws.join("out/chart.png");
    std::fs::remove_file(&checked).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), &checked).unwrap();
    let e = policy
        .open_resolved(&checked, "out/chart.png", "telegram", None)
        .unwrap_err();
    assert!(matches!(e, FileRefusal::Symlink(_)), "{e}");
    // Its folder swapped for a symlink out: the opened file is seen outside.
    std::fs::write(dir.path().join("elsewhere.txt"), b"x").unwrap();
    std::fs::remove_dir_all(ws.join("data")).unwrap();
    std::os::unix::fs::symlink(dir.path(), ws.join("data")).unwrap();
    let e = policy
        .open_resolved(
            &ws.join("data/elsewhere.txt"),
            "data/elsewhere.txt",
            "telegram",
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("symlink"), "{e}");
    // The note names the file as asked for: not where it really is, not the workspace.
    assert_eq!(
        e.to_string(),
        "refused: data/elsewhere.txt leads outside the workspace through a symlink"
    );
    // A FIFO is refused at once (opening it does not wait for a writer).
    let fifo = ws.join("out/pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success());
    assert!(matches!(
        policy.open("out/pipe", "telegram", None).unwrap_err(),
        FileRefusal::NotAFile(_)
    ));
}

#[test]
fn a_hard_link_to_one_of_chelas_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, b"token").unwrap();
    std::fs::hard_link(&config, ws.join("copy.txt")).unwrap();
    let policy = FilePolicy::new(ws, vec![config]);
    let e = policy.open("copy.txt", "telegram", None).unwrap_err();
    assert!(matches!(e, FileRefusal::Private(_)), "{e}");
}

#[tokio::test]
async fn a_final_sends_files_only_where_the_tool_policy_allows_and_its_own_media() {
    let (dir, policy) = setup();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("media/me")).unwrap();
    std::fs::create_dir_all(ws.join("media/other")).unwrap();
    std::fs::write(ws.join("media/me/1-0-a.png"), b"mine").unwrap();
    std::fs::write(ws.join("media/other/1-0-b.png"), b"theirs").unwrap();
    std::fs::write(ws.join("out/big.bin"), vec![0u8; 3 << 20]).unwrap();
    let text = "Hi\nMEDIA:media/me/1-0-a.png\nMEDIA:media/other/1-0-b.png\nMEDIA:out/big.bin";
    let checked = check_final(final_files(&policy), text.into()).await;
    let (body, paths) = split(&checked);
    assert_eq!(paths.len(), 1, "{checked}");
    assert!(paths[0].ends_with("media/me/1-0-a.png"), "{checked}");
    assert!(body.contains("belongs to another conversation"), "{body}");
    assert!(body.contains("takes files up to 2 MB"), "{body}");

    // A conversation whose tool policy leaves out `message` (a group on `minimal`).
    let minimal = FinalFiles {
        may_send: false,
        ..final_files(&policy)
    };
    let checked = check_final(minimal, "Sure\nMEDIA:out/chart.png".into()).await;
    let (body, paths) = split(&checked);
    assert!(paths.is_empty(), "{checked}");
    assert!(
        body.starts_with(
            "Sure\n(file not sent: out/chart.png: this conversation may not send files"
        ),
        "{body}"
    );
}

#[test]
fn file_lines_after_an_open_code_fence_are_still_file_lines() {
    let composed = compose("see\n```rust\nfn main() {}", &[PathBuf::from("/ws/a.png")]);
    let (body, paths) = split(&composed);
    assert_eq!(paths, ["/ws/a.png"]);
    assert_eq!(body, "see\n```rust\nfn main() {}\n```");
}

#[test]
fn a_sessions_files_come_from_its_agents_workspace() {
    let (dir, mut policy) = setup();
    let coder = dir.path().join("ws-coder");
    std::fs::create_dir_all(&coder).unwrap();
    std::fs::write(coder.join("patch.diff"), b"diff").unwrap();
    policy.others = vec![("coder".to_owned(), coder.clone())];
    let theirs = policy.for_session("agent:coder:telegram:direct:42");
    assert_eq!(theirs.workspace(), coder.as_path());
    assert!(theirs.resolve("patch.diff").is_ok());
    assert!(theirs.resolve("out/chart.png").is_err());
    let main = policy.for_session("agent:main:telegram:direct:42");
    assert!(main.resolve("out/chart.png").is_ok());
    assert!(main.resolve("patch.diff").is_err());
    // A key that does not parse keeps the default agent's workspace.
    assert!(
        policy
            .for_session("garbage")
            .resolve("out/chart.png")
            .is_ok()
    );
}
