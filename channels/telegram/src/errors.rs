//! teloxide errors -> [`ChannelError`].

use chela_channel::ChannelError;
use teloxide::{ApiError, RequestError};

/// Maps a Bot API failure to the channel error the reply path understands.
pub fn channel_error(error: RequestError) -> ChannelError {
    match error {
        RequestError::RetryAfter(wait) => ChannelError::RateLimited {
            retry_after_ms: u64::from(wait.seconds().max(1)) * 1000,
        },
        RequestError::Network(e) => ChannelError::Transport(e.to_string()),
        RequestError::Io(e) => ChannelError::Transport(e.to_string()),
        other => ChannelError::Rejected(other.to_string()),
    }
}

/// True for "message is not modified": the edit had nothing to change, which is success.
pub fn is_not_modified(error: &RequestError) -> bool {
    matches!(error, RequestError::Api(ApiError::MessageNotModified))
}

/// True when Telegram could not parse the formatting (send plain text instead).
pub fn is_bad_entities(error: &RequestError) -> bool {
    matches!(error, RequestError::Api(ApiError::CantParseEntities(_)))
}

/// True for 409 Conflict: another process polls this token.
pub fn is_conflict(error: &RequestError) -> bool {
    matches!(
        error,
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
    )
}
