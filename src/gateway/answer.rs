//! Answering a command where it was asked: privately through the platform's native-command
//! handle (a Discord slash command's interaction) when there is one, else as a message in the
//! conversation.

use std::time::Duration;

use chela_channel::{Channel, ChannelError, Conversation, Inbound};

use super::Core;
use crate::reply::split::split_all;

/// Attempts of one private part when the platform is busy or unreachable.
const ATTEMPTS: u32 = 3;

impl Core {
    /// Answers `inbound` (a command) with `text`: privately when it came with an interaction
    /// handle and its channel can answer there, else with [`Core::say`] in its conversation.
    pub async fn answer(&self, inbound: &Inbound, text: &str) {
        let to = &inbound.conversation;
        let (Some(handle), Some(channel)) =
            (inbound.interaction.as_deref(), self.channel(&to.channel))
        else {
            self.say(to, text).await;
            return;
        };
        match answer_privately(channel.as_ref(), to, handle, text).await {
            Ok(()) => {}
            Err(Undelivered { rest, error }) => {
                if !matches!(error, ChannelError::Unsupported(_)) {
                    tracing::warn!(error = %error, channel = %to.channel, "cannot answer a command privately; answering in the conversation");
                }
                self.say(to, &rest).await;
            }
        }
    }
}

/// What a private answer could not deliver.
#[derive(Debug)]
struct Undelivered {
    /// The text not delivered (all of it when the first part failed).
    rest: String,
    /// Why.
    error: ChannelError,
}

/// Sends `text` through `channel`'s private command answer, in parts that fit its limits.
async fn answer_privately(
    channel: &dyn Channel,
    to: &Conversation,
    handle: &str,
    text: &str,
) -> Result<(), Undelivered> {
    let mut parts = split_all(text, channel.limits().max_chars, None);
    if parts.is_empty() {
        parts.push(text.to_string());
    }
    for (i, part) in parts.iter().enumerate() {
        if let Err(error) = answer_part(channel, to, handle, part).await {
            return Err(Undelivered {
                rest: parts[i..].join("\n"),
                error,
            });
        }
    }
    Ok(())
}

/// One part, retried while the platform is rate limiting or unreachable.
async fn answer_part(
    channel: &dyn Channel,
    to: &Conversation,
    handle: &str,
    part: &str,
) -> Result<(), ChannelError> {
    let mut attempt = 1;
    loop {
        match channel.answer_command(to, handle, part).await {
            Err(error) if error.is_retryable() && attempt < ATTEMPTS => {
                let wait = match error {
                    ChannelError::RateLimited { retry_after_ms } => retry_after_ms,
                    _ => 500,
                };
                tokio::time::sleep(Duration::from_millis(wait)).await;
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use chela_channel::{BoxFuture, ChatKind, InboundSink, Limits, SentMessage};
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A channel that records private answers and fails them as told.
    #[derive(Default)]
    struct Recorder {
        answers: Mutex<Vec<String>>,
        /// Errors to return, in order, before answering.
        failures: Mutex<Vec<ChannelError>>,
        unsupported: bool,
    }

    impl Channel for Recorder {
        fn name(&self) -> &str {
            "fake"
        }
        fn limits(&self) -> Limits {
            Limits {
                max_chars: 100,
                max_lines: None,
                edit_interval_ms: 0,
                group_edit_interval_ms: 0,
                threads: false,
            }
        }
        fn run(
            &self,
            _sink: Arc<dyn InboundSink>,
            _shutdown: CancellationToken,
        ) -> BoxFuture<'_, Result<(), ChannelError>> {
            Box::pin(async { Ok(()) })
        }
        fn send<'a>(
            &'a self,
            _to: &'a Conversation,
            _text: &'a str,
        ) -> BoxFuture<'a, Result<SentMessage, ChannelError>> {
            Box::pin(async { Err(ChannelError::Unsupported("send")) })
        }
        fn edit<'a>(
            &'a self,
            _to: &'a Conversation,
            _message: &'a SentMessage,
            _text: &'a str,
        ) -> BoxFuture<'a, Result<(), ChannelError>> {
            Box::pin(async { Err(ChannelError::Unsupported("edit")) })
        }
        fn answer_command<'a>(
            &'a self,
            _to: &'a Conversation,
            interaction: &'a str,
            text: &'a str,
        ) -> BoxFuture<'a, Result<(), ChannelError>> {
            Box::pin(async move {
                if self.unsupported {
                    return Err(ChannelError::Unsupported("command answers"));
                }
                if let Some(error) = self.failures.lock().unwrap().pop() {
                    return Err(error);
                }
                self.answers
                    .lock()
                    .unwrap()
                    .push(format!("{interaction}: {text}"));
                Ok(())
            })
        }
    }

    fn conversation() -> Conversation {
        Conversation {
            channel: "fake".into(),
            account: "default".into(),
            kind: ChatKind::Channel,
            chat_id: "1".into(),
            thread_id: None,
        }
    }

    #[tokio::test]
    async fn a_long_answer_goes_in_parts_that_fit() {
        let channel = Recorder::default();
        let text = "word ".repeat(50);
        answer_privately(&channel, &conversation(), "i1", &text)
            .await
            .unwrap();
        let answers = channel.answers.lock().unwrap().clone();
        assert_eq!(answers.len(), 3, "{answers:#?}");
        for answer in &answers {
            assert!(answer.starts_with("i1: "));
            assert!(answer.chars().count() <= 100 + "i1: ".len(), "{answer}");
        }
        let words: usize = answers.iter().map(|a| a.matches("word").count()).sum();
        assert_eq!(words, 50);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_part_is_retried() {
        let channel = Recorder::default();
        channel
            .failures
            .lock()
            .unwrap()
            .push(ChannelError::RateLimited {
                retry_after_ms: 2_000,
            });
        answer_privately(&channel, &conversation(), "i2", "Session: x")
            .await
            .unwrap();
        assert_eq!(*channel.answers.lock().unwrap(), vec!["i2: Session: x"]);
    }

    #[tokio::test]
    async fn an_unsupported_channel_hands_back_the_whole_text() {
        let channel = Recorder {
            unsupported: true,
            ..Recorder::default()
        };
        let error = answer_privately(&channel, &conversation(), "i3", "Not allowed.")
            .await
            .unwrap_err();
        assert_eq!(error.rest, "Not allowed.");
        assert!(matches!(error.error, ChannelError::Unsupported(_)));
    }

    #[tokio::test]
    async fn a_refused_answer_is_not_retried() {
        let channel = Recorder::default();
        channel
            .failures
            .lock()
            .unwrap()
            .push(ChannelError::Rejected("Unknown Webhook".into()));
        let error = answer_privately(&channel, &conversation(), "i4", "hi")
            .await
            .unwrap_err();
        assert!(matches!(error.error, ChannelError::Rejected(_)));
        assert!(channel.answers.lock().unwrap().is_empty());
    }
}
