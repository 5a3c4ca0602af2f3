#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::os::unix::fs::symlink;

use super::*;

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(ws.path().join("sub/a.md"), "inside").unwrap();
    std::fs::write(outside.path().join("secret"), "SECRET").unwrap();
    (ws, outside)
}

#[test]
fn a_file_inside_is_read_and_a_link_inside_is_followed() {
    let (ws, _outside) = setup();
    assert_eq!(
        read_in_workspace(ws.path(), "sub/a.md", 100).unwrap(),
        b"inside"
    );
    symlink(ws.path().join("sub/a.md"), ws.path().join("alias.md")).unwrap();
    symlink("sub", ws.path().join("dir")).unwrap();
    assert_eq!(
        read_text_in_workspace(ws.path(), "alias.md", 100).unwrap(),
        "inside"
    );
    assert_eq!(
        read_text_in_workspace(ws.path(), "dir/a.md", 100).unwrap(),
        "inside"
    );
}

#[test]
fn links_out_of_the_workspace_are_refused_without_naming_the_target() {
    let (ws, outside) = setup();
    symlink(outside.path().join("secret"), ws.path().join("USER.md")).unwrap();
    symlink(outside.path(), ws.path().join("out")).unwrap();
    symlink(outside.path().join("gone"), ws.path().join("dangling.md")).unwrap();
    for name in [
        "USER.md",
        "out/secret",
        "dangling.md",
        "../x",
        "/etc/passwd",
    ] {
        let err = read_in_workspace(ws.path(), name, 100).unwrap_err();
        assert!(err.is_escape(), "{name}: {err:?}");
        let text = err.to_string();
        assert!(text.contains(name), "{text}");
        for hidden in [outside.path(), ws.path()] {
            assert!(!text.contains(hidden.to_str().unwrap()), "{text}");
        }
    }
}

#[test]
fn missing_files_folders_fifos_and_big_files_are_told_apart() {
    let (ws, _outside) = setup();
    let missing = read_in_workspace(ws.path(), "AGENTS.md", 100).unwrap_err();
    assert!(missing.is_missing() && !missing.is_escape(), "{missing:?}");
    let folder = read_in_workspace(ws.path(), "sub", 100).unwrap_err();
    assert!(matches!(folder, OpenError::NotAFile(_)), "{folder:?}");
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path().join("fifo.md"))
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = read_in_workspace(ws.path(), "fifo.md", 100).unwrap_err();
    assert!(matches!(fifo, OpenError::NotAFile(_)), "{fifo:?}");
    let big = read_in_workspace(ws.path(), "sub/a.md", 3).unwrap_err();
    assert!(matches!(big, OpenError::TooBig { max: 3, .. }), "{big:?}");
}

#[test]
fn a_symlink_swapped_in_after_the_check_is_not_followed() {
    let (ws, outside) = setup();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    // What `resolve_in_workspace` answered for a plain file, swapped for a link since.
    std::fs::remove_file(ws.path().join("sub/a.md")).unwrap();
    symlink(outside.path().join("secret"), ws.path().join("sub/a.md")).unwrap();
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(root.join("sub/a.md"));
    assert_eq!(
        opened.unwrap_err().raw_os_error(),
        Some(nix::libc::ELOOP),
        "O_NOFOLLOW refuses the link"
    );
    let err = read_in_workspace(ws.path(), "sub/a.md", 100).unwrap_err();
    assert!(err.is_escape(), "{err:?}");
}

/// What each file tool answers for a path it refuses: the path as given, never where a
/// symlink leads nor the absolute workspace.
#[tokio::test]
async fn file_tool_refusals_name_only_the_path_the_agent_gave() {
    use serde_json::json;

    use crate::agent::tools::Tool;
    use crate::agent::tools::test_support::ctx;
    let (ws, outside) = setup();
    symlink(outside.path().join("secret"), ws.path().join("leak.md")).unwrap();
    symlink(outside.path(), ws.path().join("out")).unwrap();
    std::fs::create_dir(ws.path().join("memory")).unwrap();
    symlink(
        outside.path().join("secret"),
        ws.path().join("memory/leak.md"),
    )
    .unwrap();
    symlink(outside.path().join("gone"), ws.path().join("dangling")).unwrap();
    let ctx = ctx(ws.path());
    let hidden = [
        outside.path().to_path_buf(),
        std::fs::canonicalize(outside.path()).unwrap(),
        ws.path().to_path_buf(),
        std::fs::canonicalize(ws.path()).unwrap(),
    ];
    let calls: Vec<(Box<dyn Tool>, serde_json::Value, &str)> = vec![
        (
            Box::new(super::super::read::ReadTool),
            json!({"path": "leak.md"}),
            "leak.md",
        ),
        (
            Box::new(super::super::read::ReadTool),
            json!({"path": "out/secret"}),
            "out/secret",
        ),
        (
            Box::new(super::super::read::ReadTool),
            json!({"path": "dangling"}),
            "dangling",
        ),
        (
            Box::new(super::super::read::ReadTool),
            json!({"path": "../x"}),
            "../x",
        ),
        (
            Box::new(super::super::write::WriteTool),
            json!({"path": "out/new", "content": "x"}),
            "out/new",
        ),
        (
            Box::new(super::super::edit::EditTool),
            json!({"path": "leak.md", "old_text": "S", "new_text": "x"}),
            "leak.md",
        ),
        (
            Box::new(super::super::ls::LsTool),
            json!({"path": "out"}),
            "out",
        ),
        (
            Box::new(super::super::memory::get::MemoryGetTool),
            json!({"path": "memory/leak.md"}),
            "memory/leak.md",
        ),
    ];
    for (tool, args, given) in calls {
        let out = tool.call(args, &ctx).await;
        let text = out.text.clone();
        assert!(out.is_error, "{text}");
        assert!(text.contains(&format!("refused: {given} ")), "{text}");
        for path in &hidden {
            assert!(!text.contains(path.to_str().unwrap()), "{text}");
        }
        assert!(!text.contains("SECRET"), "{text}");
    }
}

/// `name` (a plain file or nothing when resolved) swapped for a symlink to `target`.
fn swap_for_link(ws: &Path, name: &str, target: &Path) {
    let at = ws.join(name);
    if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
        std::fs::rename(&at, ws.join(format!("{name}.old"))).unwrap();
    } else if at.exists() {
        std::fs::remove_file(&at).unwrap();
    }
    symlink(target, at).unwrap();
}

#[test]
fn writes_create_and_overwrite_inside_and_follow_links_that_stay_inside() {
    let (ws, _outside) = setup();
    write_in_workspace(ws.path(), "new/dir/b.md", b"fresh").unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new/dir/b.md")).unwrap(),
        "fresh"
    );
    // Overwriting with something shorter leaves nothing of the old content.
    write_in_workspace(ws.path(), "new/dir/b.md", b"x").unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new/dir/b.md")).unwrap(),
        "x"
    );
    symlink(ws.path().join("sub/a.md"), ws.path().join("alias.md")).unwrap();
    symlink("sub", ws.path().join("dir")).unwrap();
    write_in_workspace(ws.path(), "alias.md", b"via alias").unwrap();
    write_in_workspace(ws.path(), "dir/c.md", b"via dir").unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sub/a.md")).unwrap(),
        "via alias"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sub/c.md")).unwrap(),
        "via dir"
    );
    let err = write_in_workspace(ws.path(), "sub", b"x").unwrap_err();
    assert!(matches!(err, WriteError::Directory(_)), "{err:?}");
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path().join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    let err = write_in_workspace(ws.path(), "fifo", b"x").unwrap_err();
    assert!(matches!(err, WriteError::NotAFile(_)), "{err:?}");
}

#[test]
fn writes_through_links_out_of_the_workspace_are_refused() {
    let (ws, outside) = setup();
    symlink(outside.path().join("secret"), ws.path().join("USER.md")).unwrap();
    symlink(outside.path(), ws.path().join("out")).unwrap();
    for name in ["USER.md", "out/secret", "out/new", "../x"] {
        let err = write_in_workspace(ws.path(), name, b"PWNED").unwrap_err();
        assert!(err.is_escape(), "{name}: {err:?}");
        let text = err.to_string();
        assert!(text.contains(name), "{text}");
        for hidden in [outside.path(), ws.path()] {
            assert!(!text.contains(hidden.to_str().unwrap()), "{text}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "SECRET"
    );
    assert!(!outside.path().join("new").exists());
}

/// The race of a sandboxed job swapping the file for a link between the check and the
/// open, made deterministic: resolved first, swapped, then written and read. Before the
/// fix the tools wrote with `tokio::fs::write` (following the link): the secret outside
/// was overwritten.
#[test]
fn a_file_swapped_for_a_link_out_after_the_check_is_neither_written_nor_read() {
    let (ws, outside) = setup();
    let resolved = resolve_in_workspace(ws.path(), "sub/a.md").unwrap();
    swap_for_link(ws.path(), "sub/a.md", &outside.path().join("secret"));
    let err = write_resolved(ws.path(), &resolved, "sub/a.md", b"PWNED").unwrap_err();
    assert!(matches!(err, WriteError::Symlink(_)), "{err:?}");
    assert_eq!(err.to_string(), "refused: sub/a.md is a symlink");
    let err = read_resolved(ws.path(), &resolved, "sub/a.md", 100).unwrap_err();
    assert!(matches!(err, OpenError::Symlink(_)), "{err:?}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "SECRET"
    );
}

/// As above with a parent folder swapped: `O_NOFOLLOW` only guards the last component,
/// the `/proc/self/fd` check of the open file catches this one, before anything is
/// written (the file outside is opened without truncating it, and left as it was).
#[test]
fn a_folder_swapped_for_a_link_out_after_the_check_is_neither_written_nor_read() {
    let (ws, outside) = setup();
    let resolved = resolve_in_workspace(ws.path(), "sub/secret").unwrap();
    swap_for_link(ws.path(), "sub", outside.path());
    let err = write_resolved(ws.path(), &resolved, "sub/secret", b"PWNED").unwrap_err();
    assert!(matches!(err, WriteError::Escaped(_)), "{err:?}");
    let text = err.to_string();
    assert_eq!(
        text,
        "refused: sub/secret leads outside the workspace through a symlink"
    );
    let err = read_resolved(ws.path(), &resolved, "sub/secret", 100).unwrap_err();
    assert!(matches!(err, OpenError::Escaped(_)), "{err:?}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "SECRET"
    );
}

/// A folder swapped for a link out before a write that creates a file and folders under
/// it: refused, and nothing (no folder, no empty file) is made outside. Before the folders
/// were opened one step at a time beneath the workspace, `create_dir_all` and `O_CREAT`
/// followed the link and left `new/` and an empty `f.md` outside.
#[test]
fn a_folder_swapped_for_a_link_out_before_a_new_file_makes_nothing_outside() {
    let (ws, outside) = setup();
    let resolved = resolve_in_workspace(ws.path(), "sub/new/f.md").unwrap();
    let flat = resolve_in_workspace(ws.path(), "sub/f.md").unwrap();
    swap_for_link(ws.path(), "sub", outside.path());
    for (path, name) in [(&resolved, "sub/new/f.md"), (&flat, "sub/f.md")] {
        let err = write_resolved(ws.path(), path, name, b"PWNED").unwrap_err();
        assert!(matches!(err, WriteError::Escaped(_)), "{name}: {err:?}");
    }
    let left: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["secret"]);
}
