//! A tool call's result as text for the model: the text blocks, then a line for each other
//! block (a picture, a resource), or the structured content when nothing else came.

use rmcp::model::{CallToolResult, ContentBlock};

/// What a call of a server's tool answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpReply {
    /// The text for the model.
    pub text: String,
    /// The server said the call failed (`isError`).
    pub is_error: bool,
}

impl McpReply {
    /// The reply `result` gives.
    pub fn of(result: &CallToolResult) -> McpReply {
        let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
        if parts.iter().all(|p| p.trim().is_empty())
            && let Some(structured) = &result.structured_content
        {
            parts = vec![structured.to_string()];
        }
        McpReply {
            text: parts.join("\n"),
            is_error: result.is_error.unwrap_or(false),
        }
    }
}

fn block_text(block: &ContentBlock) -> String {
    if let Some(text) = block.as_text() {
        return text.text.clone();
    }
    if let Some(image) = block.as_image() {
        let bytes = image.data.len() / 4 * 3;
        return format!(
            "[image: {}, about {bytes} bytes, not shown]",
            image.mime_type
        );
    }
    if block.as_audio().is_some() {
        return "[audio, not shown]".to_owned();
    }
    if let Some(link) = block.as_resource_link() {
        return format!("[resource: {}]", link.uri);
    }
    match block.as_resource() {
        Some(embedded) => match serde_json::to_value(&embedded.resource) {
            Ok(value) => match value.get("text").and_then(|t| t.as_str()) {
                Some(text) => text.to_owned(),
                None => "[a binary resource, not shown]".to_owned(),
            },
            Err(_) => "[a resource, not shown]".to_owned(),
        },
        None => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn text_pictures_and_structured_content_read_as_text() {
        let reply = McpReply::of(&result(serde_json::json!({
            "content": [
                {"type": "text", "text": "here"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ]
        })));
        assert_eq!(
            reply.text,
            "here\n[image: image/png, about 3 bytes, not shown]"
        );
        assert!(!reply.is_error);
        let reply = McpReply::of(&result(serde_json::json!({
            "content": [], "structuredContent": {"sum": 3}, "isError": true
        })));
        assert_eq!(reply.text, "{\"sum\":3}");
        assert!(reply.is_error);
    }
}
