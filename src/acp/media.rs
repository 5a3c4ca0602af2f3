//! Pictures that came with a chat message, handed to a coding agent (docs/coding-agents.md):
//! as ACP `image` content blocks (base64 + MIME type) when the agent advertised
//! `promptCapabilities.image` in `initialize`, else as a note naming the file inside the
//! agent's working folder (copied into `<cwd>/.chela-media/` when chela's media folder lies
//! outside it), so its own tools can open it.

use std::path::{Path, PathBuf};

use base64::Engine;

use crate::agent::tools::confined::read_in_workspace;
use crate::agent::tools::paths::resolve_in_workspace;
use crate::domain::message::ContentBlock;

/// The folder inside an agent's working folder where pictures are copied.
pub const COPY_DIR: &str = ".chela-media";

/// One picture as an ACP image block carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptImage {
    /// The bytes, base64.
    pub data: String,
    /// Its MIME type.
    pub mime_type: String,
}

/// What one bound turn sends: the text and the pictures that go as image blocks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prompt {
    /// The text block.
    pub text: String,
    /// Image blocks after it.
    pub images: Vec<PromptImage>,
}

impl Prompt {
    /// A prompt of text alone.
    pub fn text(text: impl Into<String>) -> Prompt {
        Prompt {
            text: text.into(),
            images: Vec::new(),
        }
    }
}

/// The prompt for `text` and its `media` (chela's image blocks, their paths relative to
/// `workspace`), for an agent working in `cwd` that takes image blocks or not.
pub async fn prompt_for(
    text: String,
    media: &[ContentBlock],
    workspace: &Path,
    cwd: &Path,
    images_ok: bool,
) -> Prompt {
    let mut prompt = Prompt::text(text);
    for block in media {
        let ContentBlock::Image(image) = block else {
            continue;
        };
        let file = image.path.as_deref();
        if images_ok {
            let data = match (file, image.data.is_empty()) {
                (_, false) => Some(image.data.clone()),
                (Some(file), true) => read_picture(workspace, file)
                    .await
                    .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes)),
                (None, true) => None,
            };
            match data {
                Some(data) => prompt.images.push(PromptImage {
                    data,
                    mime_type: image.mime_type.clone(),
                }),
                None => tracing::warn!(file = ?file, "cannot read a picture for a coding agent"),
            }
            continue;
        }
        let Some(file) = file else { continue };
        // Resolved as the file tools resolve paths: a picture linked out of the workspace
        // is neither named nor copied.
        let file = match resolve_in_workspace(workspace, file) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(file, error = %e, "refused: a picture for a coding agent leads outside the workspace");
                continue;
            }
        };
        match in_folder(&file, cwd).await {
            Ok(path) => prompt.text.push_str(&format!(
                "\n[the picture is at {} in your working folder]",
                path.display()
            )),
            Err(e) => {
                tracing::warn!(error = %e, file = %file.display(), "cannot copy a picture into a coding agent's folder");
            }
        }
    }
    prompt
}

/// The bytes of picture `file` (relative to `workspace`), opened as chela opens workspace
/// files (no symlink out of the workspace followed); `None` when it cannot be read.
async fn read_picture(workspace: &Path, file: &str) -> Option<Vec<u8>> {
    let (root, file) = (workspace.to_path_buf(), file.to_owned());
    let limit = crate::agent::media::MAX_IMAGE_BYTES;
    tokio::task::spawn_blocking(move || read_in_workspace(&root, &file, limit).ok())
        .await
        .ok()
        .flatten()
}

/// `file` as a path relative to `cwd`: as it is when it lies inside, else copied into
/// `<cwd>/.chela-media/`.
async fn in_folder(file: &Path, cwd: &Path) -> std::io::Result<PathBuf> {
    let real = tokio::fs::canonicalize(file).await?;
    let cwd = tokio::fs::canonicalize(cwd).await?;
    if let Ok(inside) = real.strip_prefix(&cwd) {
        return Ok(inside.to_path_buf());
    }
    let name = real
        .file_name()
        .ok_or_else(|| std::io::Error::other("a picture without a file name"))?;
    let name = name.to_owned();
    let dir = cwd.join(COPY_DIR);
    let copy = dir.join(&name);
    tokio::task::spawn_blocking(move || copy_into(&real, &dir, &copy))
        .await
        .map_err(std::io::Error::other)??;
    Ok(Path::new(COPY_DIR).join(&name))
}

/// Copies `from` to `to` inside `dir` (made if missing), never through a symlink: a
/// symlinked `dir` is refused, and the copy is created new (`O_EXCL`, no symlink followed),
/// whatever stood at `to` removed first (a symlink itself, not its target).
fn copy_into(from: &Path, dir: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir)?;
    if std::fs::symlink_metadata(dir)?.file_type().is_symlink() {
        return Err(std::io::Error::other(format!(
            "{} is a symlink; no picture is copied through it",
            dir.display()
        )));
    }
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(to)
    };
    let mut out = match create() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(to)?;
            create()?
        }
        other => other?,
    };
    let mut source = std::fs::File::open(from)?;
    std::io::copy(&mut source, &mut out)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::message::ImageBlock;

    fn block(path: &str) -> ContentBlock {
        ContentBlock::Image(ImageBlock {
            data: String::new(),
            mime_type: "image/png".into(),
            path: Some(path.into()),
        })
    }

    #[tokio::test]
    async fn an_agent_taking_images_gets_image_blocks_others_a_path_in_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("media/s")).unwrap();
        std::fs::write(ws.join("media/s/1-0-cat.png"), b"PNG").unwrap();
        let media = [block("media/s/1-0-cat.png")];

        let with = prompt_for("look".into(), &media, &ws, &ws, true).await;
        assert_eq!(with.text, "look");
        assert_eq!(
            with.images,
            [PromptImage {
                data: base64::engine::general_purpose::STANDARD.encode(b"PNG"),
                mime_type: "image/png".into()
            }]
        );

        // The media folder inside the agent's folder: named where it is.
        let inside = prompt_for("look".into(), &media, &ws, &ws, false).await;
        assert!(inside.images.is_empty());
        assert_eq!(
            inside.text,
            "look\n[the picture is at media/s/1-0-cat.png in your working folder]"
        );

        // Outside: copied in.
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let outside = prompt_for("look".into(), &media, &ws, &project, false).await;
        assert_eq!(
            outside.text,
            "look\n[the picture is at .chela-media/1-0-cat.png in your working folder]"
        );
        assert_eq!(
            std::fs::read(project.join(".chela-media/1-0-cat.png")).unwrap(),
            b"PNG"
        );
    }

    #[tokio::test]
    async fn a_copy_never_goes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("media/s")).unwrap();
        std::fs::write(ws.join("media/s/1-0-cat.png"), b"PNG").unwrap();
        let media = [block("media/s/1-0-cat.png")];
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("victim"), b"keep").unwrap();

        // A symlink where the copy goes: replaced, its target untouched.
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(COPY_DIR)).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join("victim"),
            project.join(COPY_DIR).join("1-0-cat.png"),
        )
        .unwrap();
        let prompt = prompt_for("look".into(), &media, &ws, &project, false).await;
        assert!(
            prompt.text.contains(".chela-media/1-0-cat.png"),
            "{}",
            prompt.text
        );
        assert_eq!(std::fs::read(elsewhere.join("victim")).unwrap(), b"keep");
        let copy = project.join(COPY_DIR).join("1-0-cat.png");
        assert!(!std::fs::symlink_metadata(&copy).unwrap().is_symlink());
        assert_eq!(std::fs::read(&copy).unwrap(), b"PNG");

        // A symlinked `.chela-media`: nothing is copied through it.
        let other = dir.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(&elsewhere, other.join(COPY_DIR)).unwrap();
        let prompt = prompt_for("look".into(), &media, &ws, &other, false).await;
        assert_eq!(prompt.text, "look");
        assert!(!elsewhere.join("1-0-cat.png").exists());
    }

    #[tokio::test]
    async fn a_picture_linked_out_of_the_workspace_is_neither_read_nor_copied() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("media/s")).unwrap();
        std::fs::write(dir.path().join("id_rsa"), b"PRIVATE KEY").unwrap();
        std::os::unix::fs::symlink(dir.path().join("id_rsa"), ws.join("media/s/1-0-cat.png"))
            .unwrap();
        let media = [block("media/s/1-0-cat.png")];
        let with = prompt_for("look".into(), &media, &ws, &ws, true).await;
        assert!(with.images.is_empty(), "{with:?}");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let without = prompt_for("look".into(), &media, &ws, &project, false).await;
        assert_eq!(without.text, "look");
        assert!(!project.join(COPY_DIR).exists());
    }
}
