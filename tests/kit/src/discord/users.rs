//! Simulated users: guilds, channels and users made known up front, and messages written,
//! edited and deleted by users, each dispatched to the bot's session.

use serde_json::json;

use super::FakeDiscord;
use super::json::{BOT_ID, iso_now};
use super::message::{Draft, attachment};
use super::state::{Gate, Stored};
use super::types::{ChannelKind, ChannelSpec, MessageOptions, UserSpec};

impl FakeDiscord {
    /// Makes guild `id` known under `name` (READY lists it, `GUILD_CREATE` describes it). A
    /// guild first seen while the bot is connected is announced with `GUILD_CREATE`.
    pub fn add_guild(&self, id: u64, name: &str) {
        self.shared.lock().upsert_guild(id, Some(name));
        self.shared.touch();
    }

    /// Gives `user` the roles `roles` in `guild` (served by `GET /guilds/{g}/members/{u}`).
    pub fn set_member_roles(&self, guild: u64, user: u64, roles: &[u64]) {
        self.shared
            .lock()
            .member_roles
            .insert((guild, user), roles.to_vec());
        self.shared.touch();
    }

    /// Makes `channel` known (with its guild and parent) without a message in it. A new
    /// thread is announced with `THREAD_CREATE`, owned by the bot.
    pub fn add_channel(&self, channel: ChannelSpec) {
        self.shared.lock().ensure_channel(&channel, BOT_ID);
        self.shared.touch();
    }

    /// Makes `user` known: its `<@id>` in content becomes a mention, and the bot may open a
    /// DM with it (`POST /users/@me/channels`).
    pub fn add_user(&self, user: UserSpec) {
        self.shared.lock().remember_user(&user);
        self.shared.touch();
    }

    /// `author` writes `content` in `channel`; dispatches `MESSAGE_CREATE` and returns the
    /// message id. Without a session (before IDENTIFY, after an invalid session) the message
    /// is stored but no one hears of it, as on Discord; wait for
    /// [`FakeDiscord::connected`] first.
    pub fn user_sends(&self, channel: ChannelSpec, author: UserSpec, content: &str) -> u64 {
        self.user_sends_with(channel, author, content, MessageOptions::default())
    }

    /// [`FakeDiscord::user_sends_with`] whose `content` is `raw` written into the gateway
    /// frame as is, between the quotes: escapes stay as written, so `bad \ud800` gives a
    /// `MESSAGE_CREATE` with a lone UTF-16 surrogate that strict JSON decoders reject.
    pub fn user_sends_raw(
        &self,
        channel: ChannelSpec,
        author: UserSpec,
        raw: &str,
        options: MessageOptions,
    ) -> u64 {
        let placeholder = {
            let mut state = self.shared.lock();
            let placeholder = format!("\u{e000}raw{}\u{e000}", state.raw_texts.len());
            state.raw_texts.push((placeholder.clone(), raw.to_owned()));
            placeholder
        };
        self.user_sends_with(channel, author, &placeholder, options)
    }

    /// [`FakeDiscord::user_sends`] with mentions, a reply or attachments.
    pub fn user_sends_with(
        &self,
        channel: ChannelSpec,
        author: UserSpec,
        content: &str,
        options: MessageOptions,
    ) -> u64 {
        let mut guard = self.shared.lock();
        let state = &mut *guard;
        state.remember_user(&author);
        for user in &options.mentions {
            state.remember_user(user);
        }
        state.ensure_channel(&channel, author.id);
        let Some(ch) = state.channels.get_mut(&channel.id) else {
            return 0;
        };
        if ch.spec.kind == ChannelKind::Dm && ch.recipient.is_none() {
            ch.recipient = Some(author.clone());
        }
        let guild = ch.spec.guild_id;
        let already =
            content.contains(&format!("<@{BOT_ID}>")) || content.contains(&format!("<@!{BOT_ID}>"));
        let content = if options.mentions_bot && !already {
            format!("<@{BOT_ID}> {content}")
        } else {
            content.to_owned()
        };
        let roles: String = options
            .mention_roles
            .iter()
            .map(|r| format!("<@&{r}> "))
            .collect();
        let content = format!("{roles}{content}");
        let reply = options
            .referenced_message_id
            .and_then(|id| ch.live(id).map(|m| (id, m.json.clone(), m.author_id)));
        let mut ids = state.mentioned_in(&content);
        let mut extra: Vec<u64> = options.mentions.iter().map(|u| u.id).collect();
        if options.mentions_bot {
            extra.push(BOT_ID);
        }
        if let Some((_, _, replied_author)) = &reply
            && !options.reply_without_ping
        {
            extra.push(*replied_author);
        }
        for id in extra {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let mentions = ids.iter().filter_map(|&id| state.user_json(id)).collect();
        let id = state.next_id();
        let mut attachments = Vec::new();
        for spec in &options.attachments {
            let attachment_id = state.next_id();
            if let Some(data) = &spec.data {
                let path = format!(
                    "/attachments/{}/{attachment_id}/{}",
                    channel.id, spec.filename
                );
                state.files.insert(path, data.clone());
            }
            attachments.push(attachment(
                &self.shared.base_url,
                attachment_id,
                channel.id,
                &spec.filename,
                spec.size,
                spec.content_type.as_deref(),
            ));
        }
        let draft = Draft {
            id,
            channel_id: channel.id,
            author: author.to_json(),
            content: content.clone(),
            mentions,
            mention_everyone: options.mention_everyone,
            mention_roles: options.mention_roles.clone(),
            reply: reply
                .as_ref()
                .map(|(target, json, _)| (*target, json.clone())),
            attachments,
            embeds: Vec::new(),
            nonce: None,
            tts: false,
            components: Vec::new(),
        };
        let message = draft.to_json(guild);
        state.store_message(
            channel.id,
            Stored {
                json: message,
                from_bot: false,
                author_id: author.id,
                content,
                mentions_bot: ids.contains(&BOT_ID),
                edits: 0,
                deleted: false,
                nonce: None,
                reference: reply.map(|r| r.0),
                allowed_mentions: None,
                attachments: options
                    .attachments
                    .iter()
                    .map(|a| a.filename.clone())
                    .collect(),
                thread: None,
                reactions: Vec::new(),
            },
        );
        if state.hold_for_ready {
            state.after_ready.push((channel.id, id));
        } else {
            state.dispatch_message("MESSAGE_CREATE", channel.id, id);
        }
        drop(guard);
        self.shared.touch();
        id
    }

    /// A user edits their message `message_id` in `channel_id` to `content`; dispatches
    /// `MESSAGE_UPDATE`. Returns false if there is no such live message.
    pub fn user_edits(&self, channel_id: u64, message_id: u64, content: &str) -> bool {
        let mut state = self.shared.lock();
        let Some(stored) = state
            .channels
            .get_mut(&channel_id)
            .and_then(|c| c.messages.get_mut(&message_id))
            .filter(|m| !m.deleted && !m.from_bot)
        else {
            return false;
        };
        stored.json["content"] = json!(content);
        stored.json["edited_timestamp"] = json!(iso_now());
        stored.content = content.to_owned();
        stored.edits += 1;
        state.dispatch_message("MESSAGE_UPDATE", channel_id, message_id);
        drop(state);
        self.shared.touch();
        true
    }

    /// A user deletes message `message_id` in `channel_id`; dispatches `MESSAGE_DELETE`.
    /// Returns false if there is no such live message.
    pub fn user_deletes(&self, channel_id: u64, message_id: u64) -> bool {
        let mut state = self.shared.lock();
        let Some(ch) = state.channels.get_mut(&channel_id) else {
            return false;
        };
        let guild = ch.spec.guild_id;
        let Some(stored) = ch.messages.get_mut(&message_id).filter(|m| !m.deleted) else {
            return false;
        };
        stored.deleted = true;
        let mut data =
            json!({ "id": message_id.to_string(), "channel_id": channel_id.to_string() });
        if let Some(guild) = guild {
            data["guild_id"] = json!(guild.to_string());
        }
        let gate = Gate::Message {
            guild: guild.is_some(),
            content_visible: true,
        };
        state.dispatch("MESSAGE_DELETE", data, gate);
        drop(state);
        self.shared.touch();
        true
    }
}
