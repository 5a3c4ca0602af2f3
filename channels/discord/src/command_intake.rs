//! Slash-command interactions: acknowledged at once with a deferred private answer (Discord
//! wants an answer within 3 s, and the person who ran the command is the only one to see
//! it), then normalized and handed to the sink like a message. What the adapter itself turns
//! away (guilds and channels outside the allowlists) is refused privately, so no command is
//! left showing "The application did not respond".

use std::sync::Arc;

use chela_channel::InboundSink;
use serenity::builder::{
    CreateInteractionResponse, CreateInteractionResponseMessage, EditInteractionResponse,
};
use serenity::http::Http;
use serenity::model::application::CommandInteraction;
use serenity::model::channel::ChannelType;

use crate::interaction::normalize_command;
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
            return self.refuse(&command, NOT_HERE).await;
        }
        let place = match guild {
            None => Place::Direct,
            Some(guild) => self.place(&command, guild).await,
        };
        let Some(inbound) = normalize_command(&command, place, self.state.account()) else {
            return self
                .refuse(&command, "Only slash commands are supported.")
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
            return self.refuse(&command, NOT_HERE).await;
        }
        if let Err(e) = self.sink.accept(inbound).await {
            tracing::error!(error = %e, "discord: slash command not accepted");
            self.refuse(&command, "Could not take the command; try again.")
                .await;
        }
    }

    /// Where the command's channel sits: the interaction says when it is a thread, else it
    /// is looked up like a message's channel.
    async fn place(&self, command: &CommandInteraction, guild: u64) -> Place {
        if let Some(channel) = &command.channel
            && matches!(
                channel.kind,
                ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread
            )
            && let Some(parent) = channel.parent_id
        {
            let place = Place::Thread(parent.get());
            self.state
                .remember(command.channel_id.get(), place, Some(guild));
            return place;
        }
        self.state.place(command.channel_id, guild).await
    }

    /// Replaces the deferred answer with `text`.
    async fn refuse(&self, command: &CommandInteraction, text: &str) {
        let edit = EditInteractionResponse::new().content(text);
        if let Err(e) = command.edit_response(&*self.http, edit).await {
            tracing::warn!(error = %e, "discord: cannot refuse a slash command");
        }
    }
}
