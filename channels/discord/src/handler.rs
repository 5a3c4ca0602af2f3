//! The serenity event handler: it only normalizes and hands on (serenity runs each event in
//! its own task, so a long run can never delay a heartbeat).

use std::sync::Arc;

use chela_channel::InboundSink;
use serenity::async_trait;
use serenity::model::channel::{GuildChannel, Message};
use serenity::model::gateway::Ready;
use serenity::prelude::{Context, EventHandler};

use crate::normalize::{Place, normalize};
use crate::state::State;

/// Hands Discord events to chela.
pub struct Handler {
    /// Where accepted messages go.
    pub sink: Arc<dyn InboundSink>,
    /// What the channel knows about the bot and the channels it saw.
    pub state: Arc<State>,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        tracing::info!(bot = %ready.user.name, guilds = ready.guilds.len(), "discord connected");
        self.state.set_bot(ready.user.id);
    }

    async fn thread_create(&self, _ctx: Context, thread: GuildChannel) {
        if let Some(parent) = thread.parent_id {
            self.state.remember(
                thread.id.get(),
                Place::Thread(parent.get()),
                Some(thread.guild_id.get()),
            );
        }
    }

    async fn message(&self, _ctx: Context, message: Message) {
        let Some(bot) = self.state.bot() else { return };
        if message.author.id == bot {
            return;
        }
        let guild = message.guild_id.map(|g| g.get());
        if let Some(guild) = guild
            && !self.state.guild_allowed(guild)
        {
            tracing::info!(
                guild,
                "discord message from a guild not in channels.discord.guilds; dropped"
            );
            return;
        }
        let place = match guild {
            None => Place::Direct,
            Some(guild) => self.state.place(message.channel_id, guild).await,
        };
        let Some(inbound) = normalize(&message, bot, place, self.state.account()) else {
            return;
        };
        if place != Place::Direct
            && let Ok(chat) = inbound.conversation.chat_id.parse::<u64>()
            && !self.state.channel_allowed(chat)
        {
            tracing::info!(
                chat,
                "discord message from a channel not in channels.discord.channels; dropped"
            );
            return;
        }
        if let Err(e) = self.sink.accept(inbound).await {
            tracing::error!(error = %e, "discord: inbound not accepted");
        }
    }
}
