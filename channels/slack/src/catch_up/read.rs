//! Reading one chat in a catch-up pass: its messages after the cursor go through the intake
//! oldest first, and the chat is read no further at the first one the sink refuses (its
//! cursor is held below it, so the next catch-up reads it again). A parent the bot is
//! addressed in, found in a channel's history with replies newer than the cursor, has its
//! thread read too (its replies are not in the channel's history, and its thread had no
//! cursor yet).

use std::collections::HashSet;

use serde_json::Value;

use super::plan::{Chat, Plan};
use super::reads::Reads;
use super::{MAX_CHATS, MAX_PAGES, PER_PAGE};
use crate::intake::{Intake, Taken};
use crate::state::thread_key;
use crate::ts;

/// What a pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Chats read.
    pub read: usize,
    /// Messages the sink took.
    pub taken: usize,
    /// Chats read no further at a refused message.
    pub refused: usize,
    /// Chats with more messages than [`MAX_PAGES`] pages.
    pub capped: usize,
    /// Chats left because their channel's type could not be learnt.
    pub skipped: usize,
    /// Chats that could not be read.
    pub failed: usize,
}

impl Tally {
    /// Logs what the pass did, with a warning for what it left.
    pub fn report(&self) {
        if self.refused + self.skipped + self.failed > 0 {
            tracing::warn!(
                refused = self.refused,
                skipped = self.skipped,
                failed = self.failed,
                "the Slack catch-up left conversations to the next one"
            );
        }
        if self.taken > 0 {
            tracing::info!(chats = self.read, taken = self.taken, "Slack catch-up");
        }
    }
}

/// What taking a chat's messages in order came to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Took {
    /// How many the sink took.
    pub taken: usize,
    /// Whether it stopped at a refused one.
    pub refused: bool,
    /// The `ts` of taken top-level messages the bot is addressed in whose thread has replies
    /// after the cursor.
    pub parents: Vec<String>,
}

/// Hands `messages` (oldest first) of `channel` to the intake until the sink refuses one.
pub async fn take_in_order(
    intake: &Intake,
    messages: &[Value],
    channel: &str,
    channel_type: &str,
    oldest: i64,
) -> Took {
    let mut took = Took::default();
    for message in messages {
        let mut event = message.clone();
        event["channel"] = Value::String(channel.to_string());
        match intake.take(&event, channel_type).await {
            Taken::Refused => {
                took.refused = true;
                break;
            }
            Taken::Accepted { addressed } => {
                took.taken += 1;
                if addressed && let Some(parent) = parent_with_replies_after(message, oldest) {
                    took.parents.push(parent.to_string());
                }
            }
            Taken::Ignored => {}
        }
    }
    took
}

/// The `ts` of a top-level message whose thread's latest reply is after `oldest` (µs).
fn parent_with_replies_after(message: &Value, oldest: i64) -> Option<&str> {
    let at = message["ts"].as_str()?;
    if message["thread_ts"].as_str().is_some_and(|t| t != at) {
        return None;
    }
    let latest = message["latest_reply"].as_str().and_then(ts::to_micros)?;
    (latest > oldest).then_some(at)
}

/// Reads the chats of one pass.
pub struct Reader<'a> {
    intake: &'a Intake,
    reads: Reads<'a>,
    /// Nothing older is read (µs).
    floor: i64,
    /// Threads read in this pass, or to be read through their cursors.
    threads: HashSet<String>,
    /// Threads read because their parent was found.
    found: usize,
    /// What the pass did so far.
    pub tally: Tally,
}

impl<'a> Reader<'a> {
    /// The reader of `plan`'s chats, nothing older than `floor` (µs).
    pub fn new(intake: &'a Intake, floor: i64, plan: &Plan) -> Reader<'a> {
        let threads = plan
            .chats
            .iter()
            .filter_map(|c| Some(thread_key(&c.channel, c.thread.as_deref()?)))
            .collect();
        Reader {
            intake,
            reads: Reads::new(&intake.api),
            floor,
            threads,
            found: 0,
            tally: Tally::default(),
        }
    }

    /// Reads `chat`, and the threads of addressed parents it found.
    pub async fn chat(&mut self, chat: &Chat) {
        let parents = self.one(chat).await;
        for parent in parents {
            if self.found >= MAX_CHATS || !self.threads.insert(thread_key(&chat.channel, &parent)) {
                continue;
            }
            self.found += 1;
            let thread = Chat {
                channel: chat.channel.clone(),
                thread: Some(parent),
                at: chat.at,
            };
            self.one(&thread).await;
        }
    }

    /// Reads one chat; the addressed parents with newer replies it found.
    async fn one(&mut self, chat: &Chat) -> Vec<String> {
        let Some(channel_type) = self.reads.channel_type(&chat.channel).await else {
            self.tally.skipped += 1;
            return Vec::new();
        };
        let oldest = chat.at.max(self.floor);
        let read = match &chat.thread {
            None => self.reads.history(&chat.channel, oldest).await,
            Some(thread) => self.reads.replies(&chat.channel, thread, oldest).await,
        };
        let read = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, channel = chat.channel, thread = ?chat.thread,
                    "the Slack catch-up could not read a conversation");
                self.tally.failed += 1;
                return Vec::new();
            }
        };
        self.tally.read += 1;
        if read.capped {
            self.tally.capped += 1;
            let most = MAX_PAGES * usize::from(PER_PAGE);
            match &chat.thread {
                None => tracing::warn!(
                    channel = chat.channel,
                    most,
                    "more messages were missed in a Slack channel than the catch-up reads: the newest were taken, older ones are skipped"
                ),
                Some(thread) => tracing::warn!(
                    channel = chat.channel,
                    thread,
                    most,
                    "more replies were missed in a Slack thread than the catch-up reads: the oldest were taken, the next catch-up reads on"
                ),
            }
        }
        let took = take_in_order(
            self.intake,
            &read.messages,
            &chat.channel,
            channel_type,
            oldest,
        )
        .await;
        self.tally.taken += took.taken;
        if took.refused {
            self.tally.refused += 1;
        }
        took.parents
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sink::{Sink, intake, settle};
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn a_refused_message_stops_the_chat_and_is_read_again_next_time() {
        let sink = Sink::refusing(&["lost"]);
        let intake = intake(sink.clone());
        let m = |ts: &str, text: &str| json!({"type":"message","user":"U1","text":text,"ts":ts});
        let messages = [
            m("1.000100", "first"),
            m("1.000200", "lost"),
            m("1.000300", "after"),
        ];
        let took = take_in_order(&intake, &messages, "D1", "im", 1_000_000).await;
        settle().await;
        assert_eq!((took.taken, took.refused), (1, true));
        assert_eq!(sink.texts(), ["first"], "nothing after the refused one");
        assert_eq!(sink.cursor("D1"), Some(1_000_100));

        // Live, a later message is taken: the cursor stays below the refused one.
        intake
            .take(
                &json!({"channel":"D1","user":"U1","text":"live","ts":"1.000400"}),
                "im",
            )
            .await;
        settle().await;
        assert_eq!(sink.cursor("D1"), Some(1_000_199), "held below 1.000200");

        // The next catch-up reads from the cursor: the refused one is taken now.
        let again: Vec<Value> = messages[1..].to_vec();
        let took = take_in_order(&intake, &again, "D1", "im", 1_000_199).await;
        settle().await;
        assert_eq!((took.taken, took.refused), (2, false));
        assert_eq!(sink.texts(), ["first", "live", "lost", "after"]);
        assert_eq!(sink.cursor("D1"), Some(1_000_300));
    }

    #[tokio::test(start_paused = true)]
    async fn addressed_parents_with_newer_replies_are_found() {
        let sink = Sink::refusing(&[]);
        let intake = intake(sink.clone());
        let messages = [
            json!({"user":"U1","text":"<@UBOT> look","ts":"1.000100","thread_ts":"1.000100","latest_reply":"1.000500"}),
            json!({"user":"U1","text":"no mention","ts":"1.000200","thread_ts":"1.000200","latest_reply":"1.000600"}),
            json!({"user":"U1","text":"<@UBOT> old replies","ts":"1.000300","thread_ts":"1.000300","latest_reply":"1.000050"}),
            json!({"user":"U1","text":"<@UBOT> broadcast","ts":"1.000400","thread_ts":"1.000010","subtype":"thread_broadcast"}),
        ];
        let took = take_in_order(&intake, &messages, "C1", "channel", 1_000_060).await;
        settle().await;
        assert_eq!(took.taken, 4);
        assert_eq!(took.parents, ["1.000100"]);
        assert_eq!(
            sink.cursor("C1"),
            Some(1_000_300),
            "parents move the channel's cursor"
        );
        assert_eq!(sink.cursor("C1/1.000100"), Some(1_000_100));
    }
}
