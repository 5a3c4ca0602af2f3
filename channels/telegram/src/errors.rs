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
        // An unreadable answer (a proxy's HTML error page) is the transport's fault.
        RequestError::InvalidJson { raw, .. } => ChannelError::Transport(format!(
            "unreadable answer: {}",
            raw.chars().take(120).collect::<String>()
        )),
        other => ChannelError::Rejected(other.to_string()),
    }
}

/// True for 409 Conflict: another process polls this token.
pub fn is_conflict(error: &RequestError) -> bool {
    matches!(
        error,
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
    )
}
