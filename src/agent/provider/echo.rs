//! The `echo` provider: answers `echo: <last user text>`.
//!
//! A wiring check only (does a message get from a channel to a run and back?). It calls no
//! model, and chela uses it only when `model.provider = "echo"` is set explicitly.

use super::{BoxFuture, EventStream, Provider, ProviderError, ProviderEvent, ProviderRequest};
use crate::domain::message::{Message, StopReason, Usage, text_of};

/// Pieces the answer is streamed in, at most.
const PIECES: usize = 3;

/// Answers `echo: <last user text>` in a few text deltas, then `Done`.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoProvider;

impl EchoProvider {
    /// The echo provider.
    pub fn new() -> Self {
        EchoProvider
    }
}

impl Provider for EchoProvider {
    fn name(&self) -> &str {
        "echo"
    }

    fn model(&self) -> &str {
        "echo"
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        let last_user = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(user) => Some(text_of(&user.content)),
                _ => None,
            })
            .unwrap_or_default();
        let answer = format!("echo: {last_user}");
        let mut events: Vec<Result<ProviderEvent, ProviderError>> = split(&answer, PIECES)
            .into_iter()
            .map(|piece| Ok(ProviderEvent::TextDelta(piece)))
            .collect();
        events.push(Ok(ProviderEvent::Done {
            stop_reason: StopReason::Stop,
            usage: Usage::default(),
        }));
        Box::pin(async move {
            let stream: EventStream = Box::pin(futures_util::stream::iter(events));
            Ok(stream)
        })
    }
}

/// Splits `text` into at most `pieces` non-empty parts on char boundaries.
fn split(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn echoes_the_last_user_text_in_pieces_then_done() -> Result<(), ProviderError> {
        let request = ProviderRequest {
            system: String::new(),
            messages: vec![Message::user("first"), Message::user("héllo there")],
            tools: Vec::new(),
            max_tokens: 0,
            model: None,
            thinking: crate::agent::provider::Thinking::Off,
            show_reasoning: false,
            cache_key: None,
        };
        let events: Vec<ProviderEvent> = EchoProvider::new()
            .stream(request)
            .await?
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let mut text = String::new();
        for event in &events[..events.len() - 1] {
            let ProviderEvent::TextDelta(piece) = event else {
                panic!("unexpected {event:?}");
            };
            text.push_str(piece);
        }
        assert_eq!(text, "echo: héllo there");
        assert!(events.len() > 2);
        assert!(matches!(
            events.last(),
            Some(ProviderEvent::Done {
                stop_reason: StopReason::Stop,
                ..
            })
        ));
        Ok(())
    }
}
