//! Compatibility: a real serenity 0.12.5 bot against the fake Discord. It gets READY and
//! GUILD_CREATE, guild, DM and thread messages, replies and edits its reply, creates a thread
//! from a message, and survives a dropped connection by resuming.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use chela_testkit::discord::{ChannelSpec, FakeDiscord, UserSpec};
use serenity::all::{
    ChannelType, ClientBuilder, Context, CreateThread, EditMessage, EventHandler, GatewayIntents,
    Guild, GuildChannel, HttpBuilder, Message, Ready, ResumedEvent, ShardManager,
};
use serenity::async_trait;
use tokio::sync::mpsc;

const GUILD: u64 = 800;
const CHANNEL: u64 = 801;
const DM: u64 = 700;
const THREAD: u64 = 850;
const WAIT: Duration = Duration::from_secs(10);

/// What the bot saw or did, reported to the test.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Ready {
        session_id: String,
        user: String,
    },
    Guild(u64),
    Thread {
        id: u64,
        parent: Option<u64>,
    },
    Message {
        id: u64,
        channel: u64,
        guild: Option<u64>,
        content: String,
        from_bot: bool,
    },
    Replied {
        reply: u64,
        to: u64,
    },
    MadeThread {
        id: u64,
        kind: ChannelType,
    },
    Resumed,
    Failed(String),
}

struct Handler {
    tx: mpsc::UnboundedSender<Seen>,
}

impl Handler {
    fn report(&self, seen: Seen) {
        let _ = self.tx.send(seen);
    }

    /// Replies to `msg`, then edits the reply, as a streaming preview would.
    async fn reply_and_edit(&self, ctx: &Context, msg: &Message) -> serenity::Result<Seen> {
        let mut reply = msg.reply(&ctx.http, "working...").await?;
        reply
            .edit(&ctx.http, EditMessage::new().content("done: reply"))
            .await?;
        Ok(Seen::Replied {
            reply: reply.id.get(),
            to: msg.id.get(),
        })
    }

    async fn make_thread(&self, ctx: &Context, msg: &Message) -> serenity::Result<Seen> {
        let thread = msg
            .channel_id
            .create_thread_from_message(&ctx.http, msg.id, CreateThread::new("from a message"))
            .await?;
        Ok(Seen::MadeThread {
            id: thread.id.get(),
            kind: thread.kind,
        })
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        self.report(Seen::Ready {
            session_id: ready.session_id.clone(),
            user: ready.user.name.clone(),
        });
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        self.report(Seen::Resumed);
    }

    async fn guild_create(&self, _ctx: Context, guild: Guild, _is_new: Option<bool>) {
        self.report(Seen::Guild(guild.id.get()));
    }

    async fn thread_create(&self, _ctx: Context, thread: GuildChannel) {
        self.report(Seen::Thread {
            id: thread.id.get(),
            parent: thread.parent_id.map(|p| p.get()),
        });
    }

    async fn message(&self, ctx: Context, msg: Message) {
        self.report(Seen::Message {
            id: msg.id.get(),
            channel: msg.channel_id.get(),
            guild: msg.guild_id.map(|g| g.get()),
            content: msg.content.clone(),
            from_bot: msg.author.bot,
        });
        if msg.author.bot {
            return;
        }
        let outcome = match msg.content.as_str() {
            "reply please" => Some(self.reply_and_edit(&ctx, &msg).await),
            "thread please" => Some(self.make_thread(&ctx, &msg).await),
            _ => None,
        };
        match outcome {
            Some(Ok(seen)) => self.report(seen),
            Some(Err(error)) => self.report(Seen::Failed(error.to_string())),
            None => {}
        }
    }
}

/// The handler's reports. serenity runs each event handler call in its own task, so reports
/// may come out of order: the ones not asked for yet wait in `backlog`.
struct Reports {
    rx: mpsc::UnboundedReceiver<Seen>,
    backlog: Vec<Seen>,
}

impl Reports {
    /// The first report matching `want` (earlier unmatched ones first); panics on a failure
    /// report or after [`WAIT`].
    async fn expect<F>(&mut self, what: &str, mut want: F) -> Seen
    where
        F: FnMut(&Seen) -> bool,
    {
        if let Some(at) = self.backlog.iter().position(&mut want) {
            return self.backlog.remove(at);
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let seen = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}; saw {:?}", self.backlog))
                .expect("the handler is alive");
            if let Seen::Failed(error) = &seen {
                panic!("the bot failed while waiting for {what}: {error}");
            }
            if want(&seen) {
                return seen;
            }
            self.backlog.push(seen);
        }
    }

    /// Waits for the user message `id` to reach the handler.
    async fn message(&mut self, id: u64) -> Seen {
        self.expect(
            "a user message",
            |s| matches!(s, Seen::Message { id: got, .. } if *got == id),
        )
        .await
    }
}

const INTENTS: GatewayIntents = GatewayIntents::GUILDS
    .union(GatewayIntents::GUILD_MESSAGES)
    .union(GatewayIntents::DIRECT_MESSAGES)
    .union(GatewayIntents::MESSAGE_CONTENT);

/// Starts a serenity client against `fake` as chela would: its Http through the fake's REST
/// base with the ratelimiter off, its gateway URL forced to the fake's.
async fn start_bot(
    fake: &FakeDiscord,
) -> (
    Reports,
    Arc<ShardManager>,
    tokio::task::JoinHandle<serenity::Result<()>>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let http = HttpBuilder::new(fake.token())
        .proxy(fake.rest_url())
        .ratelimiter_disabled(true)
        .build();
    let mut client = ClientBuilder::new_with_http(http, INTENTS)
        .event_handler(Handler { tx })
        .await
        .unwrap();
    // serenity already got the URL from `GET /gateway`, which the fake answers; forcing it
    // keeps a failed lookup from falling back to the real gateway.
    *client.ws_url.lock().await = fake.gateway_url();
    let shards = client.shard_manager.clone();
    let running = tokio::spawn(async move { client.start().await });
    let reports = Reports {
        rx,
        backlog: Vec::new(),
    };
    (reports, shards, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serenity_bot_receives_replies_edits_threads_and_resumes() {
    tokio::time::timeout(Duration::from_secs(60), scenario())
        .await
        .expect("the serenity scenario finished within 60 s");
}

async fn scenario() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_guild(GUILD, "Test guild");
    let channel = ChannelSpec::guild_text(GUILD, CHANNEL);
    fake.add_channel(channel.clone());
    let alice = UserSpec::new(900, "alice").with_global_name("Alice");

    let (mut rx, shards, running) = start_bot(&fake).await;
    let intents = INTENTS;

    // READY, then GUILD_CREATE for the configured guild.
    let ready = rx
        .expect("READY", |s| matches!(s, Seen::Ready { .. }))
        .await;
    let Seen::Ready { session_id, user } = ready else {
        unreachable!()
    };
    assert_eq!(user, "chela_test");
    assert_eq!(fake.session_id(), Some(session_id));
    rx.expect("GUILD_CREATE", |s| *s == Seen::Guild(GUILD))
        .await;
    assert_eq!(fake.identify_count(), 1);
    assert_eq!(fake.intents(), Some(intents.bits()));

    // A guild message, a DM, a message in a thread.
    let id = fake.user_sends(channel.clone(), alice.clone(), "hello guild");
    let seen = rx.message(id).await;
    assert_eq!(
        seen,
        Seen::Message {
            id,
            channel: CHANNEL,
            guild: Some(GUILD),
            content: "hello guild".to_owned(),
            from_bot: false,
        }
    );
    let id = fake.user_sends(ChannelSpec::dm(DM), alice.clone(), "hello dm");
    let Seen::Message { channel, guild, .. } = rx.message(id).await else {
        unreachable!()
    };
    assert_eq!((channel, guild), (DM, None));
    let id = fake.user_sends(
        ChannelSpec::thread(GUILD, THREAD, CHANNEL),
        alice.clone(),
        "hello thread",
    );
    rx.expect("THREAD_CREATE", |s| {
        *s == Seen::Thread {
            id: THREAD,
            parent: Some(CHANNEL),
        }
    })
    .await;
    let Seen::Message { channel, guild, .. } = rx.message(id).await else {
        unreachable!()
    };
    assert_eq!((channel, guild), (THREAD, Some(GUILD)));

    // The bot replies and edits its reply.
    let asked = fake.user_sends(channel_spec(), alice.clone(), "reply please");
    let replied = rx
        .expect("the reply", |s| matches!(s, Seen::Replied { .. }))
        .await;
    let Seen::Replied { reply, to } = replied else {
        unreachable!()
    };
    assert_eq!(to, asked);
    let sent = fake.sent(CHANNEL);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].id, reply);
    assert_eq!(sent[0].content, "done: reply");
    assert_eq!(sent[0].edits, 1);
    assert_eq!(sent[0].reference, Some(asked));
    // The bot hears its own message too, as on Discord.
    rx.expect(
        "the bot's own message",
        |s| matches!(s, Seen::Message { id, from_bot: true, .. } if *id == reply),
    )
    .await;

    // The bot creates a thread from a message: the thread id is the message id.
    let starter = fake.user_sends(channel_spec(), alice.clone(), "thread please");
    let made = rx
        .expect("the new thread", |s| matches!(s, Seen::MadeThread { .. }))
        .await;
    assert_eq!(
        made,
        Seen::MadeThread {
            id: starter,
            kind: ChannelType::PublicThread,
        }
    );
    let thread = fake
        .threads()
        .into_iter()
        .find(|t| t.id == starter)
        .expect("the fake knows the thread");
    assert_eq!(thread.parent_id, CHANNEL);
    assert_eq!(thread.starter_message_id, Some(starter));
    assert_eq!(thread.owner_id, FakeDiscord::BOT_ID);
    assert_eq!(thread.name, "from a message");

    // A dropped connection: serenity resumes and gets what it missed.
    assert_eq!(fake.drop_connection(), 1);
    let missed = fake.user_sends(channel_spec(), alice.clone(), "while away");
    rx.expect("RESUMED", |s| *s == Seen::Resumed).await;
    rx.message(missed).await;
    assert!(fake.wait_for(|f| f.connected(), WAIT).await);
    assert_eq!(fake.resume_count(), 1);
    assert_eq!(fake.identify_count(), 1, "no second IDENTIFY");
    let after = fake.user_sends(channel_spec(), alice, "back again");
    rx.message(after).await;

    // REST went through the proxy base, under /api/v10.
    assert!(fake.call_count("POST", &format!("/channels/{CHANNEL}/messages")) >= 1);
    assert!(fake.call_count("GET", "/gateway") >= 1);

    shards.shutdown_all().await;
    let _ = tokio::time::timeout(WAIT, running).await;
}

/// After op 9 (not resumable) serenity restarts the shard and IDENTIFYs anew. Its shard
/// queuer waits 5 s between shard starts, so this takes about 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serenity_reidentifies_after_an_invalid_session() {
    tokio::time::timeout(Duration::from_secs(40), async {
        let fake = FakeDiscord::start().await.unwrap();
        fake.add_channel(channel_spec());
        let (mut rx, shards, running) = start_bot(&fake).await;
        rx.expect("READY", |s| matches!(s, Seen::Ready { .. }))
            .await;
        let first = fake.session_id().unwrap();
        assert_eq!(fake.invalid_session(), 1);
        let again = Duration::from_secs(20);
        assert!(
            fake.wait_for(|f| f.identify_count() == 2 && f.connected(), again)
                .await
        );
        let Seen::Ready { session_id, .. } = rx
            .expect("a second READY", |s| matches!(s, Seen::Ready { .. }))
            .await
        else {
            unreachable!()
        };
        assert_ne!(session_id, first);
        assert_eq!(fake.resume_count(), 0);
        let id = fake.user_sends(channel_spec(), UserSpec::new(900, "alice"), "still there?");
        rx.message(id).await;
        shards.shutdown_all().await;
        let _ = tokio::time::timeout(WAIT, running).await;
    })
    .await
    .expect("the invalid-session scenario finished within 40 s");
}

fn channel_spec() -> ChannelSpec {
    ChannelSpec::guild_text(GUILD, CHANNEL)
}

/// serenity's view of the fake's REST errors, with the ratelimiter disabled as chela runs it
/// against the fake: a 429 is an error for the caller, not retried.
#[tokio::test]
async fn serenity_http_sees_the_fakes_errors() {
    use serenity::all::{ChannelId, CreateMessage, HttpError, MessageId};
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_channel(channel_spec());
    let http = HttpBuilder::new(fake.token())
        .proxy(fake.rest_url())
        .ratelimiter_disabled(true)
        .build();
    let channel = ChannelId::new(CHANNEL);
    let sent = channel.say(&http, "hi").await.unwrap();
    assert_eq!(sent.content, "hi");

    fake.inject_429(1, 1.5);
    let error = channel.say(&http, "again").await.unwrap_err();
    let serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) = &error else {
        panic!("expected an unsuccessful request, got {error:?}");
    };
    assert_eq!(response.status_code.as_u16(), 429);
    eprintln!("429 as serenity sees it: {:?}", response.error);

    let error = channel
        .edit_message(
            &http,
            MessageId::new(1),
            serenity::all::EditMessage::new().content("x"),
        )
        .await
        .unwrap_err();
    let serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) = &error else {
        panic!("expected an unsuccessful request, got {error:?}");
    };
    assert_eq!(response.status_code.as_u16(), 404);
    assert_eq!(response.error.code, 10008);
    assert_eq!(response.error.message, "Unknown Message");

    // Over 2000 characters serenity refuses before sending; the fake's 50035 is for clients
    // that do send.
    let long = CreateMessage::new().content("x".repeat(2001));
    let error = channel.send_message(&http, long).await.unwrap_err();
    eprintln!("2001 characters: {error:?}");
    assert_eq!(fake.sent(CHANNEL).len(), 1);
}
