//! Simulated users: conversations and users made known up front, and what users do in them
//! (messages, thread replies, files, edits, joins), each stored and dispatched as a
//! `message` event while a Socket Mode connection is open.

use serde_json::json;

use super::FakeSlack;
use super::json;
use super::messages::Stored;
use super::state::{FileRec, State};
use super::types::{ChannelSpec, UserSpec};

/// Makes `channel` and `user` known.
fn prepare(state: &mut State, channel: &ChannelSpec, user: &UserSpec) {
    state.remember_user(user);
    state.ensure_channel(channel);
}

impl FakeSlack {
    /// Makes `user` known (`users.info`, `conversations.open`).
    pub fn add_user(&self, user: &UserSpec) {
        self.shared.lock().remember_user(user);
        self.shared.touch();
    }

    /// Makes `channel` known without a message in it.
    pub fn add_channel(&self, channel: &ChannelSpec) {
        self.shared.lock().ensure_channel(channel);
        self.shared.touch();
    }

    /// Stores a user's message (with a `rich_text` block of `text`) and dispatches its event.
    fn user_message(&self, channel: &ChannelSpec, user: &UserSpec, message: Stored) -> String {
        let mut state = self.shared.lock();
        prepare(&mut state, channel, user);
        let ts = state.store_and_dispatch(&channel.id, message);
        drop(state);
        self.shared.touch();
        ts
    }

    /// `user` writes `text` in `channel`; returns its `ts`. The `message` event goes out
    /// only while a Socket Mode connection is open (see
    /// [`FakeSlack::set_deliver_while_down`]); the message stays in the history either way.
    /// Mention the bot by writing `<@UBOT>` in `text`.
    pub fn user_sends(&self, channel: &ChannelSpec, user: &UserSpec, text: &str) -> String {
        let message = Stored {
            user: user.id.clone(),
            text: text.to_owned(),
            blocks: Some(json::rich_text(text)),
            ..Stored::default()
        };
        self.user_message(channel, user, message)
    }

    /// `user` replies `text` in the thread of `thread_ts` (the parent's `reply_count` and
    /// `latest_reply` follow); returns the reply's `ts`.
    pub fn user_replies(
        &self,
        channel: &ChannelSpec,
        user: &UserSpec,
        thread_ts: &str,
        text: &str,
    ) -> String {
        let root = {
            let mut state = self.shared.lock();
            prepare(&mut state, channel, user);
            state
                .thread_root(&channel.id, thread_ts)
                .unwrap_or_else(|_| thread_ts.to_owned())
        };
        let message = Stored {
            user: user.id.clone(),
            text: text.to_owned(),
            thread_ts: Some(root),
            blocks: Some(json::rich_text(text)),
            ..Stored::default()
        };
        self.user_message(channel, user, message)
    }

    /// `user` shares the file `file_name` (`mime`, `bytes`) in `channel` with `text`: a
    /// `file_share` message whose file's `url_private_download` serves the bytes to the bot
    /// token. Returns the message's `ts`.
    pub fn user_sends_file(
        &self,
        channel: &ChannelSpec,
        user: &UserSpec,
        text: &str,
        file_name: &str,
        mime: &str,
        bytes: impl Into<Vec<u8>>,
    ) -> String {
        let bytes = bytes.into();
        let id = {
            let mut state = self.shared.lock();
            let id = state.next_file_id();
            let file = FileRec {
                id: id.clone(),
                name: file_name.to_owned(),
                title: file_name.to_owned(),
                mimetype: mime.to_owned(),
                length: bytes.len() as u64,
                bytes: Some(bytes),
                user: user.id.clone(),
            };
            state.files.insert(id.clone(), file);
            id
        };
        let message = Stored {
            user: user.id.clone(),
            text: text.to_owned(),
            blocks: (!text.is_empty()).then(|| json::rich_text(text)),
            files: vec![id],
            subtype: Some("file_share".to_owned()),
            ..Stored::default()
        };
        self.user_message(channel, user, message)
    }

    /// `user` edits their message `ts` to `new_text`: dispatches a `message_changed` event
    /// (with `message` and `previous_message`, as Slack sends). Returns false if `ts` is no
    /// live message of `user` in `channel`.
    pub fn user_edits(
        &self,
        channel: &ChannelSpec,
        user: &UserSpec,
        ts: &str,
        new_text: &str,
    ) -> bool {
        let mut state = self.shared.lock();
        let edit_ts = state.next_ts();
        let Some(previous) = state.message_json(&channel.id, ts) else {
            return false;
        };
        let Some(message) = state
            .channels
            .get_mut(&channel.id)
            .and_then(|c| c.live_mut(ts))
            .filter(|m| m.user == user.id && !m.from_bot)
        else {
            return false;
        };
        new_text.clone_into(&mut message.text);
        message.blocks = Some(json::rich_text(new_text));
        message.edits += 1;
        message.edit_history.push(new_text.to_owned());
        message.edited = Some(edit_ts.clone());
        let current = state.message_json(&channel.id, ts);
        let event = json!({
            "type": "message",
            "subtype": "message_changed",
            "hidden": true,
            "channel": channel.id,
            "channel_type": channel.kind.channel_type(),
            "message": current,
            "previous_message": previous,
            "ts": edit_ts,
            "event_ts": edit_ts,
        });
        state.dispatch_event(event);
        drop(state);
        self.shared.touch();
        true
    }

    /// `user` joins `channel`: a `channel_join` message `<@U> has joined the channel`.
    /// Returns its `ts`.
    pub fn user_joins(&self, channel: &ChannelSpec, user: &UserSpec) -> String {
        let message = Stored {
            user: user.id.clone(),
            text: format!("<@{}> has joined the channel", user.id),
            subtype: Some("channel_join".to_owned()),
            ..Stored::default()
        };
        self.user_message(channel, user, message)
    }
}
