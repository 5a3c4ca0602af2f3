//! Slash-command and button interactions: acknowledged at once with a deferred private answer
//! (Discord wants an answer within 3 s, and the person who ran the command or pressed the
//! button is the only one to see it), then normalized and handed to the sink, a command like
//! a message, a press as a press. What the adapter itself turns away (guilds and channels
//! outside the allowlists) is refused privately, so nothing is left showing "The application
//! did not respond".

use std::sync::Arc;

use chela_channel::InboundSink;
use serenity::builder::{
    Builder, CreateInteractionResponse, CreateInteractionResponseMessage, EditInteractionResponse,
};
use serenity::http::Http;
use serenity::model::application::{CommandInteraction, ComponentInteraction};
use serenity::model::channel::{ChannelType, PartialChannel};
use serenity::model::id::ChannelId;

use crate::interaction::{normalize_command, normalize_press};
use crate::normalize::Place;
use crate::pending::Pending;
use crate::state::State;

/// The private answer to a command from a guild or channel chela does not serve.
const NOT_HERE: &str = "Not available here.";

/// Takes slash commands in.
pub struct CommandIntake {
    /// Where accepted commands go.
    pub sink: Arc<dyn InboundSink>,
    /// What the channel knows about where channels sit, and the allowlists.
    pub state: Arc<State>,
    /// Tokens of interactions awaiting their answer.
    pub pending: Arc<Pending>,
    /// The channel's REST client.
    pub http: Arc<Http>,
}

impl CommandIntake {
    /// Acknowledges `command`, then hands it on (or refuses it privately).
    pub async fn take(&self, command: CommandInteraction) {
        if self.http.application_id().is_none() {
            self.http.set_application_id(command.application_id);
        }
        let defer = CreateInteractionResponse::Defer(
            CreateInteractionResponseMessage::new().ephemeral(true),
        );
        if let Err(e) = command.create_response(&*self.http, defer).await {
            // A redelivered interaction was acknowledged before; dedupe drops it below.
            tracing::warn!(error = %e, command = %command.data.name, "discord: cannot acknowledge a slash command");
        }
        self.pending
            .remember(command.id.get(), command.token.clone());
        let guild = command.guild_id.map(|g| g.get());
        if let Some(guild) = guild
            && !self.state.guild_allowed(guild)
        {
            tracing::info!(
                guild,
                "discord command from a guild not in channels.discord.guilds; refused"
            );
            return self.refuse(&command.token, NOT_HERE).await;
        }
        let place = match guild {
            None => Place::Direct,
            Some(guild) => {
                self.place(command.channel_id, command.channel.as_ref(), guild)
                    .await
            }
        };
        let Some(inbound) = normalize_command(&command, place, self.state.account()) else {
            return self
                .refuse(&command.token, "Only slash commands are supported.")
                .await;
        };
        if place != Place::Direct
            && let Ok(chat) = inbound.conversation.chat_id.parse::<u64>()
            && !self.state.channel_allowed(chat)
        {
            tracing::info!(
                chat,
                "discord command from a channel not in channels.discord.channels; refused"
            );
            return self.refuse(&command.token, NOT_HERE).await;
        }
        if let Err(e) = self.sink.accept(inbound).await {
            tracing::error!(error = %e, "discord: slash command not accepted");
            self.refuse(&command.token, "Could not take the command; try again.")
                .await;
        }
    }

    /// Acknowledges a button press privately, then hands it to the sink (which answers it
    /// through [`chela_channel::Channel::answer_press`]); a press delivered twice is taken
    /// once.
    pub async fn take_press(&self, press: ComponentInteraction) {
        if self.http.application_id().is_none() {
            self.http.set_application_id(press.application_id);
        }
        let defer = CreateInteractionResponse::Defer(
            CreateInteractionResponseMessage::new().ephemeral(true),
        );
        if let Err(e) = press.create_response(&*self.http, defer).await {
            tracing::warn!(error = %e, "discord: cannot acknowledge a button press");
        }
        if !self.pending.remember(press.id.get(), press.token.clone()) {
            return;
        }
        let guild = press.guild_id.map(|g| g.get());
        if guild.is_some_and(|g| !self.state.guild_allowed(g)) {
            return self.refuse(&press.token, NOT_HERE).await;
        }
        let place = match guild {
            None => Place::Direct,
            Some(guild) => {
                self.place(press.channel_id, press.channel.as_ref(), guild)
                    .await
            }
        };
        let Some(normalized) = normalize_press(&press, place, self.state.account()) else {
            return self
                .refuse(&press.token, "Only buttons and menus are supported.")
                .await;
        };
        if place != Place::Direct
            && let Ok(chat) = normalized.conversation.chat_id.parse::<u64>()
            && !self.state.channel_allowed(chat)
        {
            return self.refuse(&press.token, NOT_HERE).await;
        }
        self.sink.press(normalized).await;
    }

    /// Where an interaction's channel `id` sits: the interaction's `channel` says when it is
    /// a thread, else it is looked up like a message's channel.
    async fn place(&self, id: ChannelId, channel: Option<&PartialChannel>, guild: u64) -> Place {
        if let Some(channel) = channel
            && matches!(
                channel.kind,
                ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread
            )
            && let Some(parent) = channel.parent_id
        {
            let place = Place::Thread(parent.get());
            self.state.remember(id.get(), place, Some(guild));
            return place;
        }
        self.state.place(id, guild).await
    }

    /// Replaces the deferred answer of the interaction with `token` by `text`.
    async fn refuse(&self, token: &str, text: &str) {
        let edit = EditInteractionResponse::new().content(text);
        if let Err(e) = edit.execute(&*self.http, token).await {
            tracing::warn!(error = %e, "discord: cannot refuse an interaction");
        }
    }
}
