//! Pictures that came with a chat message, handed to a coding agent (README "Coding agents"):
//! as ACP `image` content blocks (base64 + MIME type) when the agent advertised
//! `promptCapabilities.image` in `initialize`, else as a note naming the file inside the
//! agent's working folder (copied into `<cwd>/.chela-media/` when chela's media folder lies
//! outside it), so its own tools can open it.

use std::path::{Path, PathBuf};

use base64::Engine;

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
        let file = image.path.as_ref().map(|p| workspace.join(p));
        if images_ok {
            let data = match (&file, image.data.is_empty()) {
                (_, false) => Some(image.data.clone()),
                (Some(file), true) => tokio::fs::read(file)
                    .await
                    .ok()
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
    let dir = cwd.join(COPY_DIR);
    tokio::fs::create_dir_all(&dir).await?;
    tokio::fs::copy(&real, dir.join(name)).await?;
    Ok(Path::new(COPY_DIR).join(name))
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
}
