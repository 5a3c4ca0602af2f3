//! Notices: short messages outside any run (command answers, refusals, pairing prompts),
//! sent as one complete reply after the conversation's finals, and a command's answer sent
//! privately through the platform's native-command handle when there is one (`answer.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use chela_channel::{Button, Channel, ChannelError, Conversation, Inbound, SentMessage};

use super::Outbox;
use super::answer::{Undelivered, answer_privately};

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The channel it should go out on is not running.
    #[error("the {0} channel is not running")]
    NotRunning(String),
    /// The platform refused it or could not be reached.
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

/// The running channels by name.
pub type Channels = HashMap<String, Arc<dyn Channel>>;

/// Sends notices into conversations: the channels, and the outbox whose finals go first.
#[derive(Clone)]
pub struct Notices {
    channels: Arc<Channels>,
    outbox: Outbox,
}

impl Notices {
    /// Notices over `channels`, after the finals of `outbox`.
    pub fn new(channels: Channels, outbox: Outbox) -> Notices {
        Notices {
            channels: Arc::new(channels),
            outbox,
        }
    }

    /// The channel named `name`, if it runs.
    pub fn channel(&self, name: &str) -> Option<Arc<dyn Channel>> {
        self.channels.get(name).cloned()
    }

    /// Every running channel.
    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// The outbox whose finals go before a notice.
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Sends a short message (command answers, notices) as one complete reply, waiting out
    /// rate limits like a final reply does.
    pub async fn say(&self, to: &Conversation, text: &str) {
        if let Err(e) = self.send_text(to, text).await {
            tracing::warn!(error = %e, channel = %to.channel, "cannot send a notice");
        }
    }

    /// Asks `text` in `to` with `buttons` under it where the channel shows buttons (the
    /// message sent, to edit when the question ends); elsewhere, or when that send fails, it
    /// is said as plain text, whose typed answers work everywhere.
    pub async fn ask(
        &self,
        to: &Conversation,
        text: &str,
        buttons: &[Button],
    ) -> Option<SentMessage> {
        self.shown(to, text, Shown::Buttons(buttons)).await
    }

    /// Offers one choice among `options` under `text` in `to`: a select menu where the
    /// platform has one, else buttons, else (or when that send fails) the text alone.
    pub async fn offer(
        &self,
        to: &Conversation,
        text: &str,
        options: &[Button],
    ) -> Option<SentMessage> {
        self.shown(to, text, Shown::Menu(options)).await
    }

    async fn shown(&self, to: &Conversation, text: &str, shown: Shown<'_>) -> Option<SentMessage> {
        let channel = self.channel(&to.channel).filter(|c| c.has_buttons());
        if let Some(channel) = channel {
            self.outbox.settled_within(to).await;
            let sent = match shown {
                Shown::Buttons(buttons) => channel.send_buttons(to, text, buttons).await,
                Shown::Menu(options) => channel.send_menu(to, text, options).await,
            };
            match sent {
                Ok(sent) => return Some(sent),
                Err(e) => {
                    tracing::warn!(error = %e, channel = %to.channel, "cannot send a question with buttons; sending it as text");
                }
            }
        }
        self.say(to, text).await;
        None
    }

    /// Replaces the text of `message` in `to` (a question that ended; its buttons go).
    pub async fn edit(&self, to: &Conversation, message: &SentMessage, text: &str) {
        let Some(channel) = self.channel(&to.channel) else {
            return;
        };
        if let Err(e) = channel.edit(to, message, text).await {
            tracing::warn!(error = %e, channel = %to.channel, "cannot edit a question that ended");
        }
    }

    /// Answers a button press (by its handle) with `text`, which only the presser sees.
    pub async fn answer_press(&self, channel: &str, handle: &str, text: &str) {
        let Some(channel) = self.channel(channel) else {
            return;
        };
        if let Err(e) = channel.answer_press(handle, text).await {
            tracing::warn!(error = %e, channel = %channel.name(), "cannot answer a button press");
        }
    }

    /// Sends `text` into `to` as one complete reply (split as the platform needs); errors
    /// are short and safe to show.
    pub async fn send_text(&self, to: &Conversation, text: &str) -> Result<(), SendError> {
        let channel = self
            .channel(&to.channel)
            .ok_or_else(|| SendError::NotRunning(to.channel.clone()))?;
        // After the conversation's finals (a /stop answer follows the stopped reply), but
        // not held for long by a final the platform keeps refusing.
        self.outbox.settled_within(to).await;
        let mut reply = crate::reply::ReplyStream::new(channel, to.clone());
        Ok(reply.finish(text).await?)
    }

    /// Answers `inbound` (a command) with `text`: privately when it came with an interaction
    /// handle and its channel can answer there, else with [`Notices::say`] in its
    /// conversation.
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

/// How a question's answers are shown.
enum Shown<'a> {
    /// Buttons under the message.
    Buttons(&'a [Button]),
    /// One choice among options (a select menu where the platform has one).
    Menu(&'a [Button]),
}
