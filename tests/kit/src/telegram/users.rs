//! Steering the fake: chats, topics, user messages that become updates for `getUpdates`,
//! rate limits and injected 429s.

use serde_json::{Value, json};

use super::FakeTelegram;
use super::entities;
use super::state::{DEFAULT_ICON_COLOR, Stored, unix_now};
use super::types::{ChatKind, ChatSpec, RateLimits, SendOptions, UserSpec};

impl FakeTelegram {
    /// Makes `chat` known (bot calls to unknown chats get `chat not found`); a known chat keeps
    /// its messages and takes the new description.
    pub fn add_chat(&self, chat: ChatSpec) {
        self.shared.lock().upsert_chat(chat);
        self.shared.touch();
    }

    /// Creates a topic named `name` in forum `chat_id` (created by the bot, like
    /// `createForumTopic`); its `message_thread_id`, or `None` if the chat is not a known
    /// forum.
    pub fn add_topic(&self, chat_id: i64, name: &str) -> Option<i64> {
        let mut state = self.shared.lock();
        let chat = state.chats.get_mut(&chat_id).filter(|c| c.spec.is_forum)?;
        let topic = chat.create_topic(name, DEFAULT_ICON_COLOR, super::state::bot_user(), None);
        drop(state);
        self.shared.touch();
        Some(topic.message_thread_id)
    }

    /// Makes `user` an administrator of chat `chat_id` (as `getChatMember` reports it).
    pub fn set_admin(&self, chat_id: i64, user: &UserSpec) {
        self.shared
            .lock()
            .admins
            .entry(chat_id)
            .or_default()
            .insert(user.id, user.clone());
    }

    /// `from` sends a message whose `text` is `raw` written into the JSON as is, between the
    /// quotes: escapes stay as written, so `bad \ud800 text` gives an update with a lone
    /// UTF-16 surrogate that strict JSON decoders reject. Returns the message id.
    pub fn user_sends_raw(&self, chat: ChatSpec, from: UserSpec, raw: &str) -> i64 {
        let placeholder = {
            let mut state = self.shared.lock();
            let placeholder = format!("\u{e000}raw{}\u{e000}", state.raw_texts.len());
            state.raw_texts.push((placeholder.clone(), raw.to_owned()));
            placeholder
        };
        self.user_sends(chat, from, &placeholder)
    }

    /// `from` sends `text` in `chat`: queues a `message` update; returns the message id.
    pub fn user_sends(&self, chat: ChatSpec, from: UserSpec, text: &str) -> i64 {
        self.user_sends_with(chat, from, text, SendOptions::default())
    }

    /// Like [`FakeTelegram::user_sends`] with a reply target, forum topic or explicit
    /// entities (see [`SendOptions`]).
    pub fn user_sends_with(
        &self,
        mut chat: ChatSpec,
        from: UserSpec,
        text: &str,
        options: SendOptions,
    ) -> i64 {
        if chat.kind == ChatKind::Private {
            chat.first_name
                .get_or_insert_with(|| from.first_name.clone());
            if chat.username.is_none() {
                chat.username.clone_from(&from.username);
            }
        }
        let entities = if options.entities.is_empty() {
            entities::detect_entities(text)
        } else {
            options
                .entities
                .iter()
                .map(super::types::Entity::to_json)
                .collect()
        };
        let mut state = self.shared.lock();
        let chat = state.upsert_chat(chat);
        let thread = options
            .message_thread_id
            .filter(|&t| t != 1 && chat.spec.is_forum);
        if let Some(t) = thread.filter(|t| !chat.topics.contains_key(t)) {
            chat.create_topic(
                &format!("Topic {t}"),
                DEFAULT_ICON_COLOR,
                from.to_json(),
                Some(t),
            );
        }
        let reply_to = options
            .reply_to_message_id
            .filter(|&id| chat.reply_json(id).is_some());
        let id = chat.allocate_id();
        let json = chat.message_json(
            id,
            from.to_json(),
            text,
            Some(Value::Array(entities)),
            thread,
            reply_to,
        );
        chat.messages
            .insert(id, Stored::from_user(json.clone(), text, thread, reply_to));
        state.push_update("message", json);
        drop(state);
        self.shared.new_update.notify_waiters();
        self.shared.touch();
        id
    }

    /// `from` presses the button with callback data `data` under the bot's message
    /// `message_id` in `chat_id`: queues a `callback_query` update and returns its id (the
    /// bot answers it with `answerCallbackQuery`). `None` if the message is not the bot's.
    /// The button need not be there any more: a client still showing an old keyboard sends
    /// its press all the same.
    pub fn user_presses(
        &self,
        chat_id: i64,
        from: UserSpec,
        message_id: i64,
        data: &str,
    ) -> Option<String> {
        let mut state = self.shared.lock();
        let message = state
            .chats
            .get(&chat_id)
            .and_then(|c| c.messages.get(&message_id))
            .filter(|m| m.from_bot && !m.deleted)?;
        let json = message.json.clone();
        state.presses += 1;
        let id = format!("press-{}", state.presses);
        let query = json!({
            "id": id,
            "from": from.to_json(),
            "message": json,
            "chat_instance": format!("instance-{chat_id}"),
            "data": data,
        });
        state.push_update("callback_query", query);
        drop(state);
        self.shared.new_update.notify_waiters();
        self.shared.touch();
        Some(id)
    }

    /// The user edits their message `message_id` in `chat_id` to `text`: queues an
    /// `edited_message` update. `false` if there is no such user message.
    pub fn user_edits(&self, chat_id: i64, message_id: i64, text: &str) -> bool {
        let mut state = self.shared.lock();
        let Some(stored) = state
            .chats
            .get_mut(&chat_id)
            .and_then(|c| c.messages.get_mut(&message_id))
            .filter(|m| !m.from_bot && !m.deleted && m.json.get("text").is_some())
        else {
            return false;
        };
        stored.text = text.to_owned();
        stored.edits += 1;
        stored.json["text"] = json!(text);
        let entities = entities::detect_entities(text);
        match stored.json.as_object_mut() {
            Some(map) if entities.is_empty() => {
                map.remove("entities");
            }
            _ => stored.json["entities"] = Value::Array(entities),
        }
        stored.json["edit_date"] = json!(unix_now());
        let json = stored.json.clone();
        state.push_update("edited_message", json);
        drop(state);
        self.shared.new_update.notify_waiters();
        self.shared.touch();
        true
    }

    /// Switches rate limiting of `sendMessage` / `editMessageText` on or off (default off).
    pub fn enforce_rate_limits(&self, on: bool) {
        self.shared.lock().limiter.enforce = on;
    }

    /// Sets the rates used while limiting is on (default: 1/s per private chat, 20/min per
    /// group, 30/s per bot).
    pub fn set_rate_limits(&self, limits: RateLimits) {
        self.shared.lock().limiter.limits = limits;
    }

    /// Makes the next `count` sends/edits (`sendMessage`, `editMessageText`) that pass
    /// validation fail with 429 and `retry_after` = `retry_after_s` (at least 1), whether or
    /// not limits are enforced.
    pub fn inject_429(&self, count: usize, retry_after_s: u64) {
        self.shared.lock().limiter.inject(count, retry_after_s);
    }

    /// From now on, fails `sendMessage`, `editMessageText` and `deleteMessage` calls at the
    /// rates of `faults` (a faulty call is not executed); see [`Faults`](super::Faults).
    pub fn inject_faults(&self, faults: super::Faults) {
        self.shared.lock().faults.set(faults);
    }

    /// The next call of `method` (e.g. `sendMessage`) is carried out, then its connection is
    /// closed before the answer, once, with or without [`inject_faults`](Self::inject_faults).
    pub fn lose_next_answer(&self, method: &str) {
        self.shared.lock().faults.lose_next_answer(method);
    }

    /// How many faults were injected so far.
    pub fn fault_counts(&self) -> super::FaultCounts {
        self.shared.lock().faults.counts.clone()
    }
}
