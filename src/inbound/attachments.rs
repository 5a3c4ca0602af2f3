//! How a message's files are named in text (`[image]`, `[document "a.pdf"]`).

use chela_channel::{Attachment, AttachmentKind, Inbound};

/// The text of an unmentioned group message kept as context: its files are named, not
/// downloaded (`[image]`, `[document "a.pdf"]`), before its text.
pub fn context_line(inbound: &Inbound) -> String {
    let mut parts: Vec<String> = inbound
        .attachments
        .iter()
        .map(|a| format!("[{}]", what(a)))
        .collect();
    if !inbound.text.trim().is_empty() || parts.is_empty() {
        parts.push(inbound.text.clone());
    }
    parts.join(" ")
}

/// What `attachment` is, as named in text: its kind, and its file name when it has one.
pub fn what(attachment: &Attachment) -> String {
    let kind = match attachment.kind {
        AttachmentKind::Voice => "voice message",
        other => other.as_str(),
    };
    match &attachment.file_name {
        Some(name) => format!("{kind} \"{name}\""),
        None => kind.to_owned(),
    }
}
