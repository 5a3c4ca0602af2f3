//! serenity errors -> [`ChannelError`].

use chela_channel::ChannelError;
use serenity::Error;
use serenity::http::HttpError;

/// Maps a serenity REST failure to the channel error the reply path understands. With the
/// ratelimiter off (pointed at a fake) a 429 reaches us as an error without the body's
/// `retry_after` (serenity drops it): wait a second. Message sends and edits, the calls that
/// meet rate limits, go through `message_rest`, which keeps the real wait.
pub fn channel_error(error: Error) -> ChannelError {
    match error {
        Error::Http(HttpError::UnsuccessfulRequest(response)) => {
            if response.status_code.as_u16() == 429 {
                ChannelError::RateLimited {
                    retry_after_ms: 1_000,
                }
            } else if response.status_code.is_server_error() {
                ChannelError::Transport(format!("discord answered {}", response.status_code))
            } else {
                ChannelError::Rejected(format!(
                    "{} ({})",
                    response.error.message, response.error.code
                ))
            }
        }
        Error::Http(HttpError::Request(e)) => ChannelError::Transport(e.to_string()),
        Error::Io(e) => ChannelError::Transport(e.to_string()),
        other => ChannelError::Rejected(other.to_string()),
    }
}
