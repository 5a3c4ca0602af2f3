//! Intake of Discord messages, live or read from history: wait (bounded) for the bot's id
//! and for a catch-up under way, apply the allowlists, normalize, hand on to the sink, and move
//! the channel's cursor past what was handled.

use std::sync::Arc;

use chela_channel::InboundSink;
use serenity::model::channel::Message;

use crate::normalize::{Place, normalize};
use crate::shard::Shard;
use crate::state::State;

/// Hands one message on: allowlists, where it sits, normalization, the sink.
pub(crate) struct Intake {
    /// Where accepted messages go.
    pub(crate) sink: Arc<dyn InboundSink>,
    /// The bot, channels, allowlists, cursors.
    pub(crate) state: Arc<State>,
    /// The shard the messages come through (its catch-up under way).
    pub(crate) shard: Arc<Shard>,
}

impl Intake {
    /// Takes a live message, after a catch-up under way (bounded wait).
    pub(crate) async fn take(&self, message: Message) {
        if !self.shard.caught_up().await {
            tracing::warn!(
                "discord: the catch-up on history is still running; taking a live message anyway"
            );
        }
        self.take_now(message).await;
    }

    /// Takes a message at once (the catch-up's own), waiting (bounded) for the bot's id; the
    /// channel's cursor moves past it once the sink accepted it.
    pub(crate) async fn take_now(&self, message: Message) {
        let Some(bot) = self.state.wait_bot().await else {
            tracing::error!(
                message = message.id.get(),
                channel = message.channel_id.get(),
                "discord: no READY yet; message dropped (the catch-up after READY reads it again)"
            );
            return;
        };
        let (channel, id) = (message.channel_id.get(), message.id.get());
        let guild = message.guild_id.map(|g| g.get());
        let handed = self.hand_on(message, bot).await;
        // Past what was taken and what is never taken (the bot's own, other bots'), so a
        // channel's catch-up is not stuck behind them; not past a refused intake. Only a
        // taken message gives a channel its first cursor (so none for channels outside the
        // allowlists, whose messages are ignored before they are looked at).
        let known = self.state.seen().last(channel).is_some();
        let passed = match handed {
            Handed::Accepted => true,
            Handed::Ignored => known,
            Handed::OutOfScope | Handed::Failed => false,
        };
        if handed == Handed::Failed {
            self.state.seen().hold(channel, id);
        }
        if !passed {
            return;
        }
        // Where the channel sits is kept beside its cursor (the catch-up's shard filter).
        self.state.channel_guilds().note(channel, guild);
        if self.state.seen().note(channel, id) {
            self.state
                .save_first_cursor(self.sink.as_ref(), channel)
                .await;
        }
    }

    /// Hands the message to the sink, unless chela does not take it.
    async fn hand_on(&self, message: Message, bot: serenity::model::id::UserId) -> Handed {
        if message.author.id == bot {
            return Handed::Ignored;
        }
        let guild = message.guild_id.map(|g| g.get());
        if let Some(guild) = guild
            && !self.state.guild_allowed(guild)
        {
            tracing::info!(
                guild,
                "discord message from a guild not in channels.discord.guilds; dropped"
            );
            return Handed::OutOfScope;
        }
        let place = match guild {
            None => Place::Direct,
            Some(guild) => self.state.place(message.channel_id, guild).await,
        };
        let Some(mut inbound) = normalize(&message, bot, place, self.state.account()) else {
            return Handed::Ignored;
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
            return Handed::OutOfScope;
        }
        match self.sink.accept(inbound).await {
            Ok(()) => Handed::Accepted,
            Err(e) => {
                tracing::error!(error = %e, "discord: inbound not accepted");
                Handed::Failed
            }
        }
    }
}

/// What became of a message handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handed {
    /// The sink has it (durable).
    Accepted,
    /// Never taken: the bot's own, another bot's, nothing to answer.
    Ignored,
    /// From a guild or channel outside the allowlists.
    OutOfScope,
    /// The sink refused it (the store failed).
    Failed,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use chela_channel::{BoxFuture, Inbound, SinkError};
    use serenity::http::Http;
    use serenity::model::id::{ChannelId, MessageId, UserId};

    use super::*;

    #[derive(Default)]
    struct Collect(Mutex<Vec<Inbound>>);

    impl InboundSink for Collect {
        fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
            self.0.lock().unwrap().push(inbound);
            Box::pin(async { Ok(()) })
        }
    }

    fn setup() -> (Arc<Collect>, Arc<State>, Intake) {
        let http = Arc::new(Http::new("token"));
        let state = Arc::new(State::new("default".into(), vec![], vec![], http));
        let sink = Arc::new(Collect::default());
        let intake = Intake {
            sink: sink.clone(),
            state: state.clone(),
            shard: Arc::new(Shard::new(0, 1)),
        };
        (sink, state, intake)
    }

    fn dm(text: &str) -> Message {
        let mut message = Message::default();
        message.id = MessageId::new(5);
        message.channel_id = ChannelId::new(9);
        message.author.id = UserId::new(42);
        message.author.name = "ann".into();
        message.content = text.into();
        message
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_before_ready_waits_for_the_bots_id_and_is_taken() {
        let (sink, state, intake) = setup();
        let task = tokio::spawn(async move { intake.take(dm("early")).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(sink.0.lock().unwrap().is_empty(), "waits for READY");
        state.set_bot(UserId::new(1));
        task.await.unwrap();
        let taken = sink.0.lock().unwrap().clone();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].text, "early");
        assert_eq!(state.seen().last(9), Some(5), "the cursor moved past it");
        assert_eq!(state.channel_guilds().of(9), Some(None), "known as a DM");
    }

    #[tokio::test(start_paused = true)]
    async fn live_messages_wait_for_the_catch_up_under_way() {
        let (sink, state, intake) = setup();
        let shard = intake.shard.clone();
        state.set_bot(UserId::new(1));
        shard.hold_until_ready();
        let task = tokio::spawn(async move { intake.take(dm("live")).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            sink.0.lock().unwrap().is_empty(),
            "held until READY's catch-up"
        );
        shard.begin_catch_up();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(sink.0.lock().unwrap().is_empty(), "the catch-up runs");
        shard.end_catch_up();
        task.await.unwrap();
        assert_eq!(sink.0.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_cursor_moves_past_messages_chela_never_takes() {
        let (sink, state, intake) = setup();
        state.set_bot(UserId::new(1));
        let mut own = dm("my own answer");
        own.author.id = UserId::new(1);
        intake.take_now(own.clone()).await;
        assert_eq!(
            state.seen().last(9),
            None,
            "no first cursor from an ignored message"
        );
        let mut first = dm("hello");
        first.id = MessageId::new(4);
        intake.take_now(first).await;
        assert_eq!(state.seen().last(9), Some(4));
        intake.take_now(own).await;
        assert_eq!(state.seen().last(9), Some(5), "past the bot's own message");
        sink.0.lock().unwrap().clear();
        let mut other_bot = dm("beep");
        other_bot.id = MessageId::new(6);
        other_bot.author.bot = true;
        intake.take_now(other_bot).await;
        assert_eq!(state.seen().last(9), Some(6), "past another bot's message");
        assert!(
            sink.0.lock().unwrap().is_empty(),
            "neither reached the sink"
        );
    }

    /// Refuses the message with text `fail` once (a store error), takes everything else.
    struct FailOnce(Mutex<Option<String>>, Collect);

    impl InboundSink for FailOnce {
        fn accept(&self, inbound: Inbound) -> BoxFuture<'_, Result<(), SinkError>> {
            let mut fail = self.0.lock().unwrap();
            if fail.as_deref() == Some(inbound.text.as_str()) {
                *fail = None;
                return Box::pin(async { Err(SinkError("store failed".into())) });
            }
            self.1.accept(inbound)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_the_sink_failed_keeps_the_cursor_below_it_past_later_ones() {
        let http = Arc::new(Http::new("token"));
        let state = Arc::new(State::new("default".into(), vec![], vec![], http));
        state.set_bot(UserId::new(1));
        let sink = Arc::new(FailOnce(
            Mutex::new(Some("lost".into())),
            Collect::default(),
        ));
        let intake = Intake {
            sink: sink.clone(),
            state: state.clone(),
            shard: Arc::new(Shard::new(0, 1)),
        };
        let message = |id: u64, text: &str| {
            let mut m = dm(text);
            m.id = MessageId::new(id);
            m
        };
        intake.take_now(message(4, "first")).await;
        intake.take_now(message(5, "lost")).await;
        intake.take_now(message(6, "after")).await;
        assert_eq!(state.seen().last(9), Some(4), "not past the failed message");
        // The next catch-up reads it again; now it is taken, and the cursor moves on.
        intake.take_now(message(5, "lost")).await;
        intake.take_now(message(6, "after")).await;
        assert_eq!(state.seen().last(9), Some(6));
    }
}
