//! Images in the model's window: chela's image blocks name a file in the workspace; before a
//! model call they get the file's bytes (base64), or are left out when the model takes no
//! images (the user message's text already names the file, so tools can read it).

use std::path::Path;

use base64::Engine;

use crate::agent::tools::confined::read_in_workspace;
use crate::domain::message::{ContentBlock, ImageBlock, Message};

/// Largest image file read into a model call, in bytes (the APIs refuse bigger ones).
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// Fetches the files of a steered message for the run that takes it (the gateway downloads
/// them as it does a turn's); given with the run request, `None` outside the gateway.
pub trait SteerFiles: Send + Sync {
    /// The text the model gets for `steer` (a note per file added) and its image blocks.
    fn prepare<'a>(
        &'a self,
        steer: &'a crate::agent::steer::Steer,
    ) -> crate::agent::provider::BoxFuture<'a, (String, Vec<ContentBlock>)>;
}

/// A user message: `text`, then `media` (image blocks).
pub fn user_message(text: &str, media: Vec<ContentBlock>) -> Message {
    let mut message = Message::user(text);
    if let Message::User(user) = &mut message {
        user.content.extend(media);
    }
    message
}

/// `messages` as the model gets them: with `vision`, image blocks that name a file carry its
/// bytes (blocks whose file is gone or too big are left out); without, no image blocks. User
/// messages and tool results (a browser screenshot) alike; messages without images are
/// copied as they are.
pub async fn for_model(messages: &[Message], workspace: &Path, vision: bool) -> Vec<Message> {
    let shown = recent_tool_images(messages);
    let mut out = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let mut message = message.clone();
        let (content, show) = match &mut message {
            Message::User(user) => (&mut user.content, vision),
            Message::ToolResult(result) => (&mut result.content, vision && shown.contains(&index)),
            Message::Assistant(_) => {
                out.push(message);
                continue;
            }
        };
        if content.iter().any(|b| matches!(b, ContentBlock::Image(_))) {
            *content = with_images(std::mem::take(content), workspace, show).await;
        }
        out.push(message);
    }
    out
}

/// Tool results whose images still go to the model: the newest [`TOOL_IMAGES_SHOWN`] that
/// carry any (screenshots add up: every request would carry all of them again; the older
/// ones' text still names their files).
pub const TOOL_IMAGES_SHOWN: usize = 2;

/// The indexes of the tool results whose images are shown.
fn recent_tool_images(messages: &[Message]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| {
            matches!(m, Message::ToolResult(r) if r.content.iter().any(|b| matches!(b, ContentBlock::Image(_))))
        })
        .map(|(index, _)| index)
        .take(TOOL_IMAGES_SHOWN)
        .collect()
}

/// `content` with its image blocks loaded (`vision`) or left out.
async fn with_images(
    content: Vec<ContentBlock>,
    workspace: &Path,
    vision: bool,
) -> Vec<ContentBlock> {
    let mut out = Vec::with_capacity(content.len());
    for block in content {
        match block {
            ContentBlock::Image(image) if vision => {
                if let Some(image) = loaded(image, workspace).await {
                    out.push(ContentBlock::Image(image));
                }
            }
            ContentBlock::Image(_) => {}
            other => out.push(other),
        }
    }
    out
}

/// The block with its bytes: as it is when it has them, else read from its file inside
/// `workspace` (opened as the file tools open paths: a symlink out of the workspace is
/// refused, never read); `None` when the file cannot be read or is too big.
async fn loaded(mut image: ImageBlock, workspace: &Path) -> Option<ImageBlock> {
    if !image.data.is_empty() {
        return Some(image);
    }
    let relative = image.path.clone()?;
    if Path::new(&relative).is_absolute() {
        return None;
    }
    let root = workspace.to_path_buf();
    let read =
        tokio::task::spawn_blocking(move || read_in_workspace(&root, &relative, MAX_IMAGE_BYTES))
            .await;
    match read {
        Ok(Ok(bytes)) => {
            image.data = base64::engine::general_purpose::STANDARD.encode(bytes);
            Some(image)
        }
        Ok(Err(e)) => {
            if !e.is_escape() && !e.is_missing() {
                tracing::warn!(error = %e, "cannot read an image for the model");
            }
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read an image for the model");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::UserMessage;

    fn with_image(path: &str) -> Message {
        Message::User(UserMessage {
            content: vec![
                ContentBlock::text("look"),
                ContentBlock::Image(ImageBlock {
                    data: String::new(),
                    mime_type: "image/png".into(),
                    path: Some(path.into()),
                }),
            ],
            timestamp: 1,
        })
    }

    fn images(messages: &[Message]) -> Vec<ImageBlock> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::User(u) => Some(u.content.clone()),
                _ => None,
            })
            .flatten()
            .filter_map(|b| match b {
                ContentBlock::Image(i) => Some(i),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_named_file_is_read_for_a_vision_model_and_left_out_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("media")).unwrap();
        std::fs::write(dir.path().join("media/a.png"), b"hi").unwrap();
        let window = vec![Message::user("before"), with_image("media/a.png")];
        let got = for_model(&window, dir.path(), true).await;
        assert_eq!(images(&got)[0].data, "aGk=");
        assert_eq!(got[0], window[0]);
        let blind = for_model(&window, dir.path(), false).await;
        assert!(images(&blind).is_empty());
        assert_eq!(
            crate::domain::message::text_of(match &blind[1] {
                Message::User(u) => &u.content,
                _ => unreachable!(),
            }),
            "look"
        );
    }

    #[tokio::test]
    async fn a_tool_results_screenshot_is_read_for_a_vision_model_and_left_out_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("browser")).unwrap();
        std::fs::write(dir.path().join("browser/s.png"), b"hi").unwrap();
        let call = crate::domain::message::ToolCall {
            id: "c".into(),
            name: "browser".into(),
            arguments: serde_json::json!({}),
        };
        let result =
            Message::tool_result_with_images(&call, "shot", false, &["browser/s.png".into()]);
        let content = |m: &Message| match m {
            Message::ToolResult(r) => r.content.clone(),
            _ => unreachable!(),
        };
        let seen = for_model(std::slice::from_ref(&result), dir.path(), true).await;
        assert!(matches!(&content(&seen[0])[1], ContentBlock::Image(i) if i.data == "aGk="));
        let blind = for_model(std::slice::from_ref(&result), dir.path(), false).await;
        assert_eq!(content(&blind[0]).len(), 1, "only the text");
        // Only the newest two screenshots go again.
        let many = vec![result.clone(), result.clone(), result];
        let sent = for_model(&many, dir.path(), true).await;
        let counts: Vec<usize> = sent.iter().map(|m| content(m).len()).collect();
        assert_eq!(counts, [1, 2, 2]);
    }

    #[tokio::test]
    async fn missing_files_and_paths_outside_the_workspace_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let window = vec![with_image("media/gone.png"), with_image("../etc/passwd")];
        assert!(images(&for_model(&window, dir.path(), true).await).is_empty());
    }

    #[tokio::test]
    async fn a_picture_linked_out_of_the_workspace_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id_rsa"), b"PRIVATE KEY").unwrap();
        std::fs::create_dir_all(dir.path().join("media/s")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("id_rsa"),
            dir.path().join("media/s/1-0-photo.jpg"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("media/out")).unwrap();
        let window = vec![
            with_image("media/s/1-0-photo.jpg"),
            with_image("media/out/id_rsa"),
        ];
        assert!(images(&for_model(&window, dir.path(), true).await).is_empty());
    }
}
