//! Answering a command privately through the platform's native-command handle (a Discord
//! slash command's interaction), in parts that fit, retried while the platform is busy; what
//! cannot go so is handed back to be said in the conversation ([`super::Notices::answer`]).

use std::time::Duration;

use chela_channel::{Channel, ChannelError, Conversation};

use crate::reply::split::split_all;

/// Attempts of one private part when the platform is busy or unreachable.
const ATTEMPTS: u32 = 3;

/// What a private answer could not deliver.
#[derive(Debug)]
pub(super) struct Undelivered {
    /// The text not delivered (all of it when the first part failed).
    pub(super) rest: String,
    /// Why.
    pub(super) error: ChannelError,
}

/// Sends `text` through `channel`'s private command answer, in parts that fit its limits.
pub(super) async fn answer_privately(
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
    use super::*;
    use crate::test_channel::{TestChannel, direct_chat};

    /// The answers that got through, as `HANDLE: TEXT`.
    fn answered(channel: &TestChannel, refused: usize) -> Vec<String> {
        let calls = channel.calls();
        let answers = calls.iter().filter_map(|c| c.strip_prefix("answer "));
        answers.skip(refused).map(str::to_owned).collect()
    }

    #[tokio::test]
    async fn a_long_answer_goes_in_parts_that_fit() {
        let channel = TestChannel::answering(100, false);
        let text = "word ".repeat(50);
        answer_privately(&*channel, &direct_chat(), "i1", &text)
            .await
            .unwrap();
        let answers = answered(&channel, 0);
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
        let channel = TestChannel::answering(100, false);
        channel.refuse([ChannelError::RateLimited {
            retry_after_ms: 2_000,
        }]);
        answer_privately(&*channel, &direct_chat(), "i2", "Session: x")
            .await
            .unwrap();
        assert_eq!(answered(&channel, 1), ["i2: Session: x"]);
        let at: Vec<u128> = channel.timed().into_iter().map(|(ms, _)| ms).collect();
        assert_eq!(at, [0, 2_000], "retried after the wait asked");
    }

    #[tokio::test]
    async fn an_unsupported_channel_hands_back_the_whole_text() {
        let channel = TestChannel::answering(100, true);
        let error = answer_privately(&*channel, &direct_chat(), "i3", "Not allowed.")
            .await
            .unwrap_err();
        assert_eq!(error.rest, "Not allowed.");
        assert!(matches!(error.error, ChannelError::Unsupported(_)));
    }

    #[tokio::test]
    async fn a_refused_answer_is_not_retried() {
        let channel = TestChannel::answering(100, false);
        channel.refuse([ChannelError::Rejected("Unknown Webhook".into())]);
        let error = answer_privately(&*channel, &direct_chat(), "i4", "hi")
            .await
            .unwrap_err();
        assert!(matches!(error.error, ChannelError::Rejected(_)));
        assert_eq!(channel.calls().len(), 1, "tried once");
    }
}
