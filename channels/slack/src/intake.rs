//! Taking messages: a Socket Mode event or a message the catch-up read becomes an
//! [`Inbound`] handed to the sink; only once the sink has it durably is it acknowledged (a
//! message Slack gets no acknowledgement for comes again). Each taken message moves its
//! channel's (and thread's) cursor, which the catch-up reads after a restart.

use std::sync::Arc;
use std::time::Duration;

use chela_channel::InboundSink;
use serde_json::Value;

use crate::api::Api;
use crate::normalize::{self, Context, Parts};
use crate::state::{State, thread_key};
use crate::ts;

/// How long a sender's name is waited for (Slack wants an acknowledgement within 3 s).
const NAME_TIMEOUT: Duration = Duration::from_secs(1);

/// What became of a message handed to [`Intake::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// The sink has it; `addressed` when it speaks to the bot.
    Accepted {
        /// Whether it speaks to the bot (a DM, a mention, a thread the bot is in).
        addressed: bool,
    },
    /// Nothing chela takes: the bot's own, another bot's, a join, another channel's.
    Ignored,
    /// The sink did not have it (or the bot's id is not known yet).
    Refused,
}

impl Taken {
    /// Whether the message may be acknowledged (Slack sends a refused one again).
    pub fn acknowledged(self) -> bool {
        self != Taken::Refused
    }
}

/// Where taken messages go, and what they are read against.
#[derive(Clone)]
pub struct Intake {
    /// The gateway's sink.
    pub sink: Arc<dyn InboundSink>,
    /// The channel's state.
    pub state: Arc<State>,
    /// The Web API (names).
    pub api: Arc<Api>,
    /// The account id.
    pub account: String,
    /// The channels taken (empty: all).
    pub channels: Arc<[String]>,
}

impl Intake {
    /// The cursor name of a channel (`slack:<account>:last:C1`) or of a thread in it
    /// (`slack:<account>:last:C1/1700000000.000100`).
    pub fn cursor_name(&self, channel: &str, thread_ts: Option<&str>) -> String {
        match thread_ts {
            Some(thread) => format!("{}{}", self.cursor_prefix(), thread_key(channel, thread)),
            None => format!("{}{channel}", self.cursor_prefix()),
        }
    }

    /// The prefix of every cursor of this account.
    pub fn cursor_prefix(&self) -> String {
        format!("slack:{}:last:", self.account)
    }

    /// Takes one message (`channel_type` as the event says): what became of it. A refused
    /// one is not acknowledged (Slack sends it again) and holds its cursor below it (see
    /// [`crate::hold`]), so the next catch-up reads it again.
    pub async fn take(&self, event: &Value, channel_type: &str) -> Taken {
        let Some(bot_user) = self.state.bot_user() else {
            return Taken::Refused;
        };
        let cx = Context {
            account: &self.account,
            bot_user,
            channels: &self.channels,
        };
        let Some(parts) = normalize::message(event, channel_type, &cx) else {
            return Taken::Ignored;
        };
        let name = self.name_of(&parts.user).await;
        let known = parts
            .thread_ts
            .as_deref()
            .is_some_and(|t| self.state.knows_thread(&parts.channel, t));
        let inbound = parts.inbound(&cx, &name, known, |user| self.state.name(user));
        let mentioned = inbound.mentioned;
        // A thread only becomes one the bot is in (and gets a cursor) for a message the
        // gateway admitted: a stranger's mentions leave no state behind.
        let admitted = match self.sink.accept_admitted(inbound).await {
            Ok(admitted) => admitted,
            Err(e) => {
                tracing::warn!(error = %e, "a Slack message was not taken; it is read again later");
                if let Some(at) = ts::to_micros(&parts.ts) {
                    let name = self.cursor_name(&parts.channel, parts.thread_ts.as_deref());
                    self.state.holds().hold(&name, at);
                }
                return Taken::Refused;
            }
        };
        let addressed = mentioned && admitted;
        self.moved_past(&parts, addressed);
        Taken::Accepted { addressed }
    }

    /// After a taken message: its thread is one the bot is in (when it was addressed), and
    /// its cursors move past it, not past a refused message before it (in the background: a
    /// cursor left behind only makes the catch-up read the message again, and dedupe drops
    /// it).
    fn moved_past(&self, parts: &Parts, addressed: bool) {
        let thread = parts.thread_ts.clone().or_else(|| {
            (addressed && parts.kind != chela_channel::ChatKind::Direct).then(|| parts.ts.clone())
        });
        if addressed && let Some(thread) = &thread {
            self.state.remember_thread(&parts.channel, thread);
        }
        let Some(at) = ts::to_micros(&parts.ts) else {
            return;
        };
        let mut names = Vec::new();
        if parts.thread_ts.is_none() {
            names.push(self.cursor_name(&parts.channel, None));
        }
        if addressed && let Some(thread) = &thread {
            names.push(self.cursor_name(&parts.channel, Some(thread)));
        }
        let raises: Vec<(String, i64)> = names
            .into_iter()
            .map(|name| {
                let at = self.state.holds().allowed(&name, at);
                (name, at)
            })
            .collect();
        let sink = self.sink.clone();
        tokio::spawn(async move {
            for (name, at) in raises {
                if let Err(e) = sink.raise_cursor(&name, at).await {
                    tracing::debug!(error = %e, "a Slack cursor was not saved");
                }
            }
        });
    }

    /// A person's display name: remembered, else asked (`users.info`, briefly), else their id.
    pub async fn name_of(&self, user: &str) -> String {
        if let Some(name) = self.state.name(user) {
            return name;
        }
        let asked = tokio::time::timeout(
            NAME_TIMEOUT,
            self.api.get("users.info", &[("user", user.to_string())]),
        )
        .await;
        let name = match asked {
            Ok(Ok(answer)) => display_name(&answer["user"]),
            _ => None,
        };
        match name {
            Some(name) => {
                self.state.remember_name(user, &name);
                name
            }
            None => user.to_string(),
        }
    }
}

/// The name Slack shows for a user object: display name, else real name, else handle.
fn display_name(user: &Value) -> Option<String> {
    [
        &user["profile"]["display_name"],
        &user["profile"]["real_name"],
        &user["real_name"],
        &user["name"],
    ]
    .into_iter()
    .filter_map(Value::as_str)
    .map(str::trim)
    .find(|n| !n.is_empty())
    .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::test_sink::{Sink, intake, settle};

    #[tokio::test(start_paused = true)]
    async fn a_strangers_mention_leaves_no_thread_behind() {
        let sink = Sink::refusing(&[]);
        sink.strangers.lock().unwrap().push("U9".into());
        let intake = intake(sink.clone());
        let mention = json!({"channel":"C1","user":"U9","text":"<@UBOT> hi","ts":"2.000100"});
        assert_eq!(
            intake.take(&mention, "channel").await,
            Taken::Accepted { addressed: false }
        );
        settle().await;
        assert!(!intake.state.knows_thread("C1", "2.000100"));
        assert_eq!(
            sink.cursor("C1/2.000100"),
            None,
            "no thread cursor for a stranger"
        );
        assert!(
            sink.cursor("C1").is_some(),
            "the channel's cursor still moves"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_reply_holds_its_threads_cursor_not_the_channels() {
        let sink = Sink::refusing(&["lost"]);
        let intake = intake(sink.clone());
        let event = |ts: &str, text: &str, thread: Option<&str>| {
            let mut e = json!({"channel":"C1","user":"U1","text":text,"ts":ts});
            if let Some(thread) = thread {
                e["thread_ts"] = json!(thread);
            }
            e
        };
        let taken = intake
            .take(&event("1.000100", "<@UBOT> hi", None), "channel")
            .await;
        assert_eq!(taken, Taken::Accepted { addressed: true });
        let reply = |ts, text| event(ts, text, Some("1.000100"));
        assert_eq!(
            intake.take(&reply("1.000200", "lost"), "channel").await,
            Taken::Refused
        );
        assert!(!Taken::Refused.acknowledged());
        let taken = intake.take(&reply("1.000300", "more"), "channel").await;
        assert_eq!(
            taken,
            Taken::Accepted { addressed: true },
            "a thread the bot is in"
        );
        let other = intake
            .take(&event("1.000400", "chat", None), "channel")
            .await;
        assert_eq!(other, Taken::Accepted { addressed: false });
        let own = json!({"channel":"C1","user":"UBOT","text":"mine","ts":"1.000500"});
        assert_eq!(intake.take(&own, "channel").await, Taken::Ignored);
        settle().await;
        assert_eq!(
            sink.cursor("C1/1.000100"),
            Some(1_000_199),
            "below the refused reply"
        );
        assert_eq!(sink.cursor("C1"), Some(1_000_400), "the channel's moves on");
        intake.take(&reply("1.000200", "lost"), "channel").await;
        intake.take(&reply("1.000300", "more"), "channel").await;
        settle().await;
        assert_eq!(sink.cursor("C1/1.000100"), Some(1_000_300));
    }

    #[test]
    fn the_shown_name_is_the_display_name_first() {
        let user = json!({"name":"ann.h","real_name":"Ann H","profile":{"display_name":"","real_name":"Ann Hill"}});
        assert_eq!(display_name(&user).as_deref(), Some("Ann Hill"));
        assert_eq!(display_name(&json!({"name":"bob"})).as_deref(), Some("bob"));
        assert_eq!(display_name(&json!({})), None);
    }
}
