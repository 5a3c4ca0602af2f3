//! Slash commands on the fake Discord with a real serenity 0.12.5 bot: it registers global
//! commands, gets INTERACTION_CREATE (guild, thread and DM) parsed as a command interaction,
//! defers privately, edits the original response and adds a private follow-up; and the
//! interaction REST rules (one callback, no edit before it, unknown tokens).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use chela_testkit::discord::{ChannelSpec, FakeDiscord, UserSpec};
use serenity::all::{
    ClientBuilder, Command, CommandDataOptionValue, CommandInteraction, CommandOptionType, Context,
    CreateCommand, CreateCommandOption, CreateInteractionResponse,
    CreateInteractionResponseFollowup, CreateInteractionResponseMessage, EditInteractionResponse,
    EventHandler, GatewayIntents, HttpBuilder, Interaction, Ready,
};
use serenity::async_trait;
use tokio::sync::mpsc;

const GUILD: u64 = 800;
const CHANNEL: u64 = 801;
const THREAD: u64 = 802;
const DM: u64 = 700;
const WAIT: Duration = Duration::from_secs(10);

/// A command as the bot saw it: name, args, guild, channel, user.
type Seen = (String, Option<String>, Option<u64>, u64, u64);

struct Handler {
    tx: mpsc::UnboundedSender<Result<Seen, String>>,
}

impl Handler {
    async fn answer(&self, ctx: &Context, command: &CommandInteraction) -> serenity::Result<()> {
        let defer = CreateInteractionResponse::Defer(
            CreateInteractionResponseMessage::new().ephemeral(true),
        );
        command.create_response(&ctx.http, defer).await?;
        command
            .edit_response(&ctx.http, EditInteractionResponse::new().content("answer"))
            .await?;
        command
            .create_followup(
                &ctx.http,
                CreateInteractionResponseFollowup::new()
                    .content("more")
                    .ephemeral(true),
            )
            .await?;
        Ok(())
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, _ready: Ready) {
        let new = CreateCommand::new("new")
            .description("Start over")
            .add_option(
                CreateCommandOption::new(CommandOptionType::String, "args", "text").required(false),
            );
        let status = CreateCommand::new("status").description("Show status");
        if let Err(e) = Command::set_global_commands(&ctx.http, vec![new, status]).await {
            let _ = self.tx.send(Err(e.to_string()));
        }
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let Interaction::Command(command) = interaction else {
            let _ = self.tx.send(Err("not a command".into()));
            return;
        };
        let args = command.data.options.iter().find_map(|o| match &o.value {
            CommandDataOptionValue::String(s) if o.name == "args" => Some(s.clone()),
            _ => None,
        });
        let seen = (
            command.data.name.clone(),
            args,
            command.guild_id.map(|g| g.get()),
            command.channel_id.get(),
            command.user.id.get(),
        );
        let result = self.answer(&ctx, &command).await;
        let _ = self
            .tx
            .send(result.map(|()| seen).map_err(|e| e.to_string()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serenity_bot_registers_and_answers_slash_commands_privately() {
    tokio::time::timeout(Duration::from_secs(60), scenario())
        .await
        .expect("the scenario finished within 60 s");
}

async fn scenario() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_guild(GUILD, "Test guild");
    fake.add_channel(ChannelSpec::guild_text(GUILD, CHANNEL));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let http = HttpBuilder::new(fake.token())
        .proxy(fake.rest_url())
        .ratelimiter_disabled(true)
        .build();
    let intents = GatewayIntents::GUILDS | GatewayIntents::GUILD_MESSAGES;
    let mut client = ClientBuilder::new_with_http(http, intents)
        .event_handler(Handler { tx })
        .await
        .unwrap();
    *client.ws_url.lock().await = fake.gateway_url();
    let shards = client.shard_manager.clone();
    let running = tokio::spawn(async move { client.start().await });

    assert!(fake.wait_for(|f| f.commands().len() == 2, WAIT).await);
    let commands = fake.commands();
    assert_eq!(commands[0]["name"], "new");
    assert_eq!(commands[0]["options"][0]["name"], "args");
    let ann = UserSpec::new(900, "ann");

    let cases = [
        (
            ChannelSpec::guild_text(GUILD, CHANNEL),
            "new",
            Some("hello there"),
            Some(GUILD),
        ),
        (
            ChannelSpec::thread(GUILD, THREAD, CHANNEL),
            "status",
            None,
            Some(GUILD),
        ),
        (ChannelSpec::dm(DM), "status", None, None),
    ];
    for (channel, name, args, guild) in cases {
        let channel_id = channel.id;
        let id = fake.user_runs_command(channel, ann.clone(), name, args);
        let seen = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("the bot saw the command")
            .expect("the handler is alive")
            .expect("the bot answered");
        assert_eq!(
            seen,
            (
                name.to_string(),
                args.map(str::to_string),
                guild,
                channel_id,
                900
            )
        );
        let info = fake.interaction(id).unwrap();
        assert_eq!(info.callback_type, Some(5), "{info:?}");
        assert!(info.ephemeral, "{info:?}");
        assert_eq!(info.response.as_deref(), Some("answer"));
        assert_eq!(info.edits, 1);
        assert_eq!(info.followups, vec![("more".to_string(), true)]);
        assert!(fake.sent(channel_id).is_empty(), "no channel message");
    }
    let registered = fake.commands()[0]["id"].clone();
    assert_eq!(
        fake.dispatches()
            .iter()
            .find(|d| d["t"] == "INTERACTION_CREATE")
            .unwrap()["d"]["data"]["id"],
        registered,
        "the registered command's id"
    );
    shards.shutdown_all().await;
    let _ = tokio::time::timeout(WAIT, running).await;
}

/// The REST rules of interactions, without a bot.
#[tokio::test]
async fn interaction_answers_follow_discords_rules() {
    let fake = FakeDiscord::start().await.unwrap();
    let id = fake.user_runs_command(
        ChannelSpec::guild_text(GUILD, CHANNEL),
        UserSpec::new(900, "ann"),
        "status",
        None,
    );
    let token = fake.interaction(id).unwrap().token;
    let app = FakeDiscord::APPLICATION_ID;
    let client = reqwest::Client::new();
    let base = format!("{}/api/v10", fake.rest_url());
    let original = format!("{base}/webhooks/{app}/{token}/messages/@original");
    let early = client
        .patch(&original)
        .json(&serde_json::json!({"content": "too early"}))
        .send()
        .await
        .unwrap();
    assert_eq!(early.status(), 404);
    let callback = format!("{base}/interactions/{id}/{token}/callback");
    let defer = serde_json::json!({"type": 5, "data": {"flags": 64}});
    let first = client.post(&callback).json(&defer).send().await.unwrap();
    assert_eq!(first.status(), 204, "no bot token needed");
    let second = client.post(&callback).json(&defer).send().await.unwrap();
    assert_eq!(second.status(), 400);
    let body: serde_json::Value = second.json().await.unwrap();
    assert_eq!(body["code"], 40060);
    let wrong = client
        .patch(format!("{base}/webhooks/{app}/nope/messages/@original"))
        .json(&serde_json::json!({"content": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 404);
    let body: serde_json::Value = wrong.json().await.unwrap();
    assert_eq!(body["code"], 10015);
    let long = client
        .patch(&original)
        .json(&serde_json::json!({"content": "x".repeat(2001)}))
        .send()
        .await
        .unwrap();
    assert_eq!(long.status(), 400);
    let edit = client
        .patch(&original)
        .json(&serde_json::json!({"content": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(edit.status(), 200);
    let message: serde_json::Value = edit.json().await.unwrap();
    assert_eq!(message["content"], "done");
    assert_eq!(message["flags"], 64);
    let info = fake.interaction(id).unwrap();
    assert_eq!(info.response.as_deref(), Some("done"));
    assert!(info.ephemeral);
    assert_eq!(
        fake.interaction_callbacks().len(),
        2,
        "both callbacks recorded"
    );
}
