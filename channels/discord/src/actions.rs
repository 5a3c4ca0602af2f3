//! The agent's message actions on Discord: a reaction (`PUT .../reactions/{emoji}/@me`), a
//! pin (`PUT /channels/{id}/pins/{id}`) and a native poll (a message create with `poll`, through
//! `message_rest` like every create, with a nonce).

use std::time::Duration;

use chela_channel::{ChannelError, Conversation, Poll, SentMessage};
use serenity::builder::{CreateAllowedMentions, CreateMessage, CreatePoll, CreatePollAnswer};
use serenity::model::channel::{Nonce, ReactionType};
use serenity::model::id::MessageId;

use super::errors::channel_error;
use super::{DiscordChannel, id_of, sent, target};

/// How long a poll the agent starts stays open.
const POLL_DURATION: Duration = Duration::from_secs(24 * 3600);

impl DiscordChannel {
    /// Reacts to message `message_id` in `to` with `emoji`: a Unicode emoji, or a custom one
    /// as `<:name:id>`.
    pub(crate) async fn react_once(
        &self,
        to: &Conversation,
        message_id: &str,
        emoji: &str,
    ) -> Result<(), ChannelError> {
        let reaction = reaction(emoji)?;
        let message = MessageId::new(id_of(message_id)?);
        self.http
            .create_reaction(target(to)?, message, &reaction)
            .await
            .map_err(channel_error)
    }

    /// Pins message `message_id` in `to` (the bot needs Manage Messages in guilds).
    pub(crate) async fn pin_once(
        &self,
        to: &Conversation,
        message_id: &str,
    ) -> Result<(), ChannelError> {
        let message = MessageId::new(id_of(message_id)?);
        self.http
            .pin_message(target(to)?, message, None)
            .await
            .map_err(channel_error)
    }

    /// Sends `poll` into `to`, open for a day.
    pub(crate) async fn send_poll_once(
        &self,
        to: &Conversation,
        poll: &Poll,
    ) -> Result<SentMessage, ChannelError> {
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..25].to_string();
        let message = CreateMessage::new()
            .poll(native_poll(poll))
            .nonce(Nonce::String(nonce))
            .enforce_nonce(true)
            .allowed_mentions(CreateAllowedMentions::new());
        self.rest
            .create(target(to)?.get(), &message)
            .await
            .map(sent)
    }
}

/// The reaction `emoji` names: a custom emoji `<:name:id>` (or `<a:name:id>`: a name of 2 to
/// 32 letters, digits and `_`, a numeric id), or a Unicode emoji (at most 16 characters, no
/// ASCII at all but digits, `#` and `*` of keycaps). Anything else is refused before serenity
/// sees it: a custom emoji's name goes into the request's path unencoded, so `../` in it
/// would reach another endpoint.
fn reaction(emoji: &str) -> Result<ReactionType, ChannelError> {
    let emoji = emoji.trim();
    let refused = || ChannelError::Rejected(format!("{emoji:?} is not an emoji Discord takes"));
    let valid = match emoji.strip_prefix('<') {
        Some(custom) => is_custom_emoji(custom),
        None => {
            let keycap = |c: char| c.is_ascii_digit() || c == '#' || c == '*';
            !emoji.is_empty()
                && emoji.chars().count() <= 16
                && emoji.chars().all(|c| !c.is_ascii() || keycap(c))
                && !emoji.is_ascii()
        }
    };
    if !valid {
        return Err(refused());
    }
    ReactionType::try_from(emoji.to_owned()).map_err(|_| refused())
}

/// Whether `rest` (after `<`) is `a?:name:id>` with a plain name and a numeric id.
fn is_custom_emoji(rest: &str) -> bool {
    let Some(inner) = rest.strip_suffix('>') else {
        return false;
    };
    let inner = inner.strip_prefix('a').unwrap_or(inner);
    let mut parts = inner.split(':');
    let (Some(""), Some(name), Some(id), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let name_ok = (2..=32).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let id_ok = !id.is_empty() && id.len() <= 20 && id.chars().all(|c| c.is_ascii_digit());
    name_ok && id_ok
}

/// `poll` as serenity's builder.
fn native_poll(poll: &Poll) -> CreatePoll<serenity::builder::create_poll::Ready> {
    let answers = poll
        .options
        .iter()
        .map(|option| CreatePollAnswer::new().text(option.trim()))
        .collect();
    let built = CreatePoll::new()
        .question(poll.question.trim())
        .answers(answers)
        .duration(POLL_DURATION);
    if poll.multiple {
        built.allow_multiselect()
    } else {
        built
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_emoji_that_could_reach_another_endpoint_is_refused() {
        for bad in [
            "<:../../../../../guilds/1/bans/2?:1>",
            "<:name:1/../2>",
            "<:na me:1>",
            "<:x:1>",
            "<a:name:abc>",
            "../pins",
            "ok",
            "👍/..",
            "",
        ] {
            assert!(reaction(bad).is_err(), "{bad:?} taken");
        }
        assert!(reaction("<:party_blob:123456789012345678>").is_ok());
        assert!(reaction("<a:party_blob:1>").is_ok());
        assert!(reaction("❤️").is_ok());
    }

    #[test]
    fn emoji_and_polls_take_discords_shape() {
        assert!(matches!(reaction("👍").unwrap(), ReactionType::Unicode(e) if e == "👍"));
        assert!(matches!(
            reaction("<:party:600404340292059257>").unwrap(),
            ReactionType::Custom { .. }
        ));
        assert!(reaction(" ").is_err());
        let poll = Poll {
            question: "Lunch?".into(),
            options: vec!["pizza".into(), "soup".into()],
            multiple: true,
        };
        let json = serde_json::to_value(native_poll(&poll)).unwrap();
        assert_eq!(json["question"]["text"], "Lunch?");
        assert_eq!(json["answers"][1]["poll_media"]["text"], "soup");
        assert_eq!(json["duration"], 24);
        assert_eq!(json["allow_multiselect"], true);
    }
}
