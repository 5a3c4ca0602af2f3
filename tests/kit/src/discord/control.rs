//! Test hooks: breaking gateway connections in the ways Discord does, heartbeat interval,
//! injected 429s and enforced rate limits.

use std::time::Duration;

use super::FakeDiscord;
use super::state::Kick;

impl FakeDiscord {
    /// Asks every open gateway connection to do `kick`; returns how many there were.
    fn kick_all(&self, kick: Kick) -> usize {
        let mut state = self.shared.lock();
        let open: Vec<u64> = state.open.iter().copied().collect();
        for conn in &open {
            state.kicks.insert(*conn, kick);
        }
        drop(state);
        self.shared.touch();
        open.len()
    }

    /// Drops every open gateway connection abruptly (TCP closed, no close frame), keeping the
    /// session: the client should RESUME, and gets what was dispatched meanwhile. Returns how
    /// many connections were dropped.
    pub fn drop_connection(&self) -> usize {
        self.kick_all(Kick::Drop)
    }

    /// Closes every open gateway connection with a close frame of `code` (4000 unknown
    /// error: resumable; 4004 authentication failed, 4014 disallowed intents: fatal for
    /// serenity). Returns how many connections were closed.
    pub fn close_connection(&self, code: u16) -> usize {
        self.kick_all(Kick::Close(code))
    }

    /// Ends the sessions (of every shard) and sends op 9 (Invalid Session, `d: false`) on every
    /// open connection: the client must IDENTIFY anew; a RESUME of an old session gets op 9
    /// again. What is dispatched until the next READY is lost. Returns how many connections
    /// were told.
    pub fn invalid_session(&self) -> usize {
        self.shared.lock().sessions.clear();
        self.kick_all(Kick::InvalidSession)
    }

    /// Sends op 7 (Reconnect) on every open connection: the client should reconnect and
    /// RESUME. Returns how many connections were told.
    pub fn request_reconnect(&self) -> usize {
        self.kick_all(Kick::Reconnect)
    }

    /// Lets IDENTIFY ask for the privileged intents `GUILD_MEMBERS` and `GUILD_PRESENCES`
    /// (off by default: closed with 4014 `Disallowed intent(s).`, as for a bot that has not
    /// enabled them). `MESSAGE_CONTENT` is always allowed.
    pub fn allow_privileged_intents(&self, allow: bool) {
        self.shared.lock().privileged_allowed = allow;
    }

    /// Sets the number of shards `GET /gateway/bot` recommends (default 1).
    pub fn set_recommended_shards(&self, shards: u32) {
        self.shared.lock().recommended_shards = shards.max(1);
    }

    /// Sets the `heartbeat_interval` later HELLOs announce (default 41.25 s).
    pub fn set_heartbeat_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.shared.lock().heartbeat_interval_ms = ms;
    }

    /// Makes the next `count` message sends and edits (`POST`/`PATCH` on messages) that pass
    /// validation answer 429 `{"message":"You are being rate limited.","retry_after":
    /// retry_after_s,"global":false}` with `retry-after` and `x-ratelimit-*` headers. A
    /// repeated nonce answered from the dedupe does not use one up.
    pub fn inject_429(&self, count: usize, retry_after_s: f64) {
        self.shared.lock().limiter.inject(count, retry_after_s);
    }

    /// Switches per-channel rate limiting of message sends and edits on or off (off by
    /// default): by default 5 per 5 s per channel, sliding window, 429 beyond with the time
    /// until a slot frees as `retry_after`.
    pub fn enforce_rate_limits(&self, on: bool) {
        self.shared.lock().limiter.enforce = on;
    }

    /// Sets the enforced rate: at most `max` sends and edits per channel in any window of
    /// `per`.
    pub fn set_rate_limit(&self, max: u32, per: Duration) {
        let mut state = self.shared.lock();
        state.limiter.max = max;
        state.limiter.per = per;
    }

    /// From now until the next READY, users' messages are kept in their channels' history but
    /// not dispatched; right after the next READY (and its GUILD_CREATEs) they are dispatched
    /// in one burst, as messages that arrive the moment a session starts.
    pub fn hold_messages_until_ready(&self) {
        self.shared.lock().hold_for_ready = true;
    }

    /// While `on`, `DELETE /channels/{c}/messages/{m}` requests are recorded (see
    /// [`FakeDiscord::calls`]) but not answered; switching it off answers them.
    pub fn hold_deletes(&self, on: bool) {
        self.shared.hold_deletes.send_replace(on);
    }

    /// While `on`, `POST /channels/{c}/messages` requests are carried out (the message is
    /// made and dispatched) but their answers are held; switching it off sends them.
    pub fn hold_creates(&self, on: bool) {
        self.shared.hold_creates.send_replace(on);
    }
}
