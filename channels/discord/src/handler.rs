//! The serenity event handler: it only normalizes and hands on, so a long run can never delay
//! a heartbeat.
//!
//! serenity runs every handler call in its own task, so two quick messages can reach the
//! handler in either order. Messages are therefore taken from a collector, which the shard
//! runner calls synchronously in gateway order, and handed on one by one by a single task. The
//! handler itself only covers messages the collector never saw (before it was registered
//! after READY). Slash commands go to [`CommandIntake`]; READY also lets the slash commands
//! be registered (it brings the application id).

use std::sync::Arc;

use chela_channel::InboundSink;
use futures_util::StreamExt;
use serenity::async_trait;
use serenity::model::application::Interaction;
use serenity::model::channel::{GuildChannel, Message};
use serenity::model::event::Event;
use serenity::model::gateway::Ready;
use serenity::prelude::{Context, EventHandler};

use crate::command_intake::CommandIntake;
use crate::normalize::{Place, normalize};
use crate::slash::Registrar;
use crate::state::State;

/// Hands Discord events to chela.
pub struct Handler {
    /// Where accepted messages go.
    pub sink: Arc<dyn InboundSink>,
    /// What the channel knows about the bot and the channels it saw.
    pub state: Arc<State>,
    /// Takes slash commands in.
    pub commands: Arc<CommandIntake>,
    /// Registers the slash commands once READY gave the application id.
    pub registrar: Arc<Registrar>,
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, ready: Ready) {
        tracing::info!(bot = %ready.user.name, guilds = ready.guilds.len(), "discord connected");
        self.state.set_bot(ready.user.id);
        self.state.reset_collected();
        let state = self.state.clone();
        let mut messages = serenity::collector::collect(&ctx.shard, move |event| match event {
            Event::MessageCreate(created) => {
                state.note_collected(created.message.id.get());
                Some(created.message.clone())
            }
            _ => None,
        });
        let intake = Intake {
            sink: self.sink.clone(),
            state: self.state.clone(),
        };
        // A collector lives as long as its shard runner. After a new READY on the same runner
        // the old one may still deliver: every collector hands messages on in gateway order,
        // and dedupe keeps the second copy of a message out.
        tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                intake.take(message).await;
            }
        });
        self.registrar.ready(ready.application.id).await;
    }

    async fn interaction_create(&self, _ctx: Context, interaction: Interaction) {
        match interaction {
            Interaction::Command(command) => self.commands.take(command).await,
            other => tracing::debug!(kind = ?other.kind(), "discord interaction ignored"),
        }
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
        if self.state.collected(message.id.get()) {
            return;
        }
        Intake {
            sink: self.sink.clone(),
            state: self.state.clone(),
        }
        .take(message)
        .await;
    }
}

/// Hands one message on: allowlists, where it sits, normalization, the sink.
struct Intake {
    sink: Arc<dyn InboundSink>,
    state: Arc<State>,
}

impl Intake {
    async fn take(&self, message: Message) {
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
        let Some(mut inbound) = normalize(&message, bot, place, self.state.account()) else {
            return;
        };
        if !inbound.mentioned
            && let Some(guild) = guild
            && !message.mention_roles.is_empty()
        {
            // A mention of one of the bot's roles addresses the bot too.
            let roles = self.state.bot_roles(guild, bot).await;
            inbound.mentioned = message
                .mention_roles
                .iter()
                .any(|r| roles.contains(&r.get()));
        }
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
