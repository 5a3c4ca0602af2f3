//! What the channel asks Slack before Socket Mode starts: who the bot is (`auth.test`), and
//! whether Slack takes the app-level token (`apps.connections.open`), so that a wrong token
//! ends [`crate::SlackChannel`]'s run with a clear refusal instead of Socket Mode retrying it
//! forever. A failure that may pass (network, Slack down, a rate limit) is tried again.

use std::future::Future;
use std::time::Duration;

use chela_channel::ChannelError;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::Api;

/// How long a failed call at start waits before the next try.
const RETRY: Duration = Duration::from_secs(5);

/// The bot's user id from `auth.test`, asked until Slack answers (a refused token, or an
/// answer that names no user, is an error); `None` when shut down first.
pub async fn who_am_i(
    api: &Api,
    shutdown: &CancellationToken,
) -> Result<Option<(String, String)>, ChannelError> {
    let body = json!({});
    let asked = until_answered(shutdown, "auth.test", || api.post("auth.test", &body)).await?;
    asked
        .map(|me| {
            Ok((
                bot_user(&me)?,
                me["team_id"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .transpose()
}

/// `auth.test`'s bot user id, or why there is none.
fn bot_user(me: &Value) -> Result<String, ChannelError> {
    me["user_id"]
        .as_str()
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            ChannelError::Rejected(
                "auth.test named no bot user: channels.slack.bot_token must be a bot token (xoxb-…)"
                    .into(),
            )
        })
}

/// Whether Slack takes `app_token`, asked until it answers: `Ok(false)` when shut down
/// first, a refusal as [`ChannelError::Rejected`] naming the setting.
pub async fn app_token_taken(
    api: &Api,
    app_token: &str,
    shutdown: &CancellationToken,
) -> Result<bool, ChannelError> {
    let asked = until_answered(shutdown, "apps.connections.open", || async {
        api.check_app_token(app_token).await.map(|()| Value::Null)
    })
    .await;
    asked
        .map(|answered| answered.is_some())
        .map_err(app_token_error)
}

/// A refused app token, named.
fn app_token_error(error: ChannelError) -> ChannelError {
    match error {
        ChannelError::Rejected(code) => ChannelError::Rejected(format!(
            "Slack refused the app token (channels.slack.app_token: an xapp-… token with connections:write): {code}"
        )),
        other => other,
    }
}

/// `call`'s answer; a retryable failure is tried again after [`RETRY`], a refusal ends it;
/// `None` when shut down first.
async fn until_answered<F, Fut>(
    shutdown: &CancellationToken,
    method: &str,
    mut call: F,
) -> Result<Option<Value>, ChannelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Value, ChannelError>>,
{
    loop {
        let answer = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            answer = call() => answer,
        };
        match answer {
            Ok(answer) => return Ok(Some(answer)),
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, method, "slack: a call at start failed; trying again");
            }
            Err(e) => return Err(e),
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(RETRY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn an_answer_without_a_bot_user_is_an_error() {
        assert_eq!(bot_user(&json!({"user_id": "UBOT"})).unwrap(), "UBOT");
        for me in [json!({"ok": true}), json!({"user_id": ""})] {
            let err = bot_user(&me).unwrap_err();
            assert!(matches!(err, ChannelError::Rejected(_)), "{err:?}");
        }
    }

    #[test]
    fn a_refused_app_token_is_named() {
        let err = app_token_error(ChannelError::Rejected("invalid_auth".into()));
        assert!(
            matches!(&err, ChannelError::Rejected(m) if m.contains("channels.slack.app_token") && m.contains("invalid_auth")),
            "{err:?}"
        );
        let passing = app_token_error(ChannelError::Transport("reset".into()));
        assert!(passing.is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn failures_that_may_pass_are_tried_again_and_refusals_end_it() {
        let shutdown = CancellationToken::new();
        let calls = AtomicU32::new(0);
        let answer = until_answered(&shutdown, "auth.test", || {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                match n {
                    0 => Err(ChannelError::Transport("down".into())),
                    _ => Ok(json!({"user_id": "UBOT"})),
                }
            }
        })
        .await;
        assert_eq!(answer.unwrap().unwrap()["user_id"], "UBOT");
        assert_eq!(calls.load(Ordering::Relaxed), 2);

        let refused = until_answered(&shutdown, "apps.connections.open", || async {
            Err(ChannelError::Rejected("invalid_auth".into()))
        })
        .await;
        assert!(matches!(refused, Err(ChannelError::Rejected(_))));

        shutdown.cancel();
        let stopped = until_answered(&shutdown, "auth.test", || async {
            Err(ChannelError::Transport("down".into()))
        })
        .await;
        assert!(matches!(stopped, Ok(None)));
    }
}
