//! The serenity event handler: it only normalizes and hands on, so a long run can never delay
//! a heartbeat.
//!
//! serenity runs every handler call in its own task, so two quick messages can reach the
//! handler in either order. Messages are therefore taken from a collector, which the shard
//! runner calls synchronously in gateway order, and handed on one by one by a single task. The
//! handler itself only covers messages the collector never saw (before it was registered
//! after READY). Slash commands go to [`CommandIntake`]; READY also lets the slash commands
//! be registered (it brings the application id).
//!
//! READY and RESUME start a catch-up on history ([`crate::catch_up`]); live messages wait
//! (bounded) until it is done and until the bot's id is known, so none is dropped for want
//! of READY state and a conversation's older messages are taken first.

use std::sync::Arc;

use chela_channel::InboundSink;
use futures_util::StreamExt;
use serenity::async_trait;
use serenity::gateway::{ConnectionStage, ShardStageUpdateEvent};
use serenity::model::application::Interaction;
use serenity::model::channel::{GuildChannel, Message};
use serenity::model::event::{Event, ResumedEvent};
use serenity::model::gateway::Ready;
use serenity::prelude::{Context, EventHandler};

use crate::command_intake::CommandIntake;
use crate::intake::Intake;
use crate::normalize::Place;
use crate::shard::Shard;
use crate::slash::Registrar;
use crate::state::State;

/// Hands Discord events to chela.
pub struct Handler {
    /// Where accepted messages go.
    pub sink: Arc<dyn InboundSink>,
    /// What the channel knows about the bot and the channels it saw.
    pub state: Arc<State>,
    /// The shard whose events these are.
    pub shard: Arc<Shard>,
    /// Takes slash commands in.
    pub commands: Arc<CommandIntake>,
    /// Registers the slash commands once READY gave the application id.
    pub registrar: Arc<Registrar>,
    /// REST, for the catch-up on history.
    pub http: Arc<serenity::http::Http>,
}

impl Handler {
    fn intake(&self) -> Intake {
        Intake {
            sink: self.sink.clone(),
            state: self.state.clone(),
            shard: self.shard.clone(),
        }
    }

    /// Begins a catch-up on history now (live messages wait for it) and runs it in a task
    /// of the shard's (it ends when the shard stops).
    fn catch_up(&self) {
        self.shard.begin_catch_up();
        let end = crate::catch_up::EndCatchUp(self.shard.clone());
        self.shard.spawn(crate::catch_up::catch_up(
            self.intake(),
            self.http.clone(),
            end,
        ));
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, ready: Ready) {
        tracing::info!(
            bot = %ready.user.name,
            guilds = ready.guilds.len(),
            shard = self.shard.id(),
            shards = self.shard.total(),
            "discord connected"
        );
        self.shard.set_connected(true);
        self.catch_up();
        self.state.set_bot(ready.user.id);
        self.shard.reset_collected();
        let shard = self.shard.clone();
        let mut messages = serenity::collector::collect(&ctx.shard, move |event| match event {
            Event::MessageCreate(created) => {
                shard.note_collected(created.message.id.get());
                Some(created.message.clone())
            }
            _ => None,
        });
        let intake = self.intake();
        // A collector lives as long as its shard runner, and at most as long as the shard.
        // After a new READY on the same runner the old one may still deliver: every collector
        // hands messages on in gateway order, and dedupe keeps the second copy of a message
        // out.
        self.shard.spawn(async move {
            while let Some(message) = messages.next().await {
                intake.take(message).await;
            }
        });
        self.registrar.ready(ready.application.id).await;
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        tracing::info!(shard = self.shard.id(), "discord resumed");
        self.shard.set_connected(true);
        self.catch_up();
    }

    async fn shard_stage_update(&self, _ctx: Context, event: ShardStageUpdateEvent) {
        // Connected again is announced by READY or RESUMED, which come after this stage.
        if event.new != ConnectionStage::Connected {
            self.shard.set_connected(false);
        }
    }

    async fn interaction_create(&self, _ctx: Context, interaction: Interaction) {
        match interaction {
            Interaction::Command(command) => self.commands.take(command).await,
            Interaction::Component(press) => self.commands.take_press(press).await,
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
        if self.shard.collected(message.id.get()) {
            return;
        }
        self.intake().take(message).await;
    }
}
