//! End-to-end, pictures to coding agents (docs/coding-agents.md): in a DM bound to the
//! scripted `fake-acp-agent`, a photo goes as an ACP `image` block (base64 + MIME type) when
//! the agent advertised `promptCapabilities.image`, and otherwise as a note naming the file
//! inside the agent's working folder (copied there when chela's media folder is outside it).

use crate::common;

use base64::Engine;
use chela_testkit::telegram::FileSpec;
use chela_testkit::{ChatSpec, UserSpec};
use common::acp::{self, AgentFiles};
use common::telegram::{Gateway, TgConfig, TgSetup};
use serde_json::Value;

const ANN: i64 = 7;

fn ann() -> UserSpec {
    UserSpec::new(ANN, "Ann")
}

fn picture() -> Vec<u8> {
    (0..3000u32).map(|i| (i * 11 % 253) as u8).collect()
}

async fn setup(agent_env: &str) -> (TgSetup, AgentFiles) {
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"7\"]",
        tables: &format!("[commands]\nowner_allow_from = [\"telegram:{ANN}\"]"),
        ..TgConfig::default()
    })
    .await;
    let files = acp::configure_with_env(&s.setup, "approve-reads", "", agent_env);
    (s, files)
}

/// Binds Ann's DM with `spawn`, sends a photo captioned `look`, waits for the echo; returns
/// the content blocks of the agent's one prompt.
async fn photo_to_agent(s: &TgSetup, files: &AgentFiles, spawn: &str) -> Vec<Value> {
    let mut gw: Gateway = s.gateway();
    let dm = || ChatSpec::private(ANN);
    s.tg.user_sends(dm(), ann(), spawn);
    gw.wait(s, "the binding notice", |s| {
        s.texts(ANN).iter().any(|t| t.contains("is bound here"))
    })
    .await;
    s.tg.user_sends_file(dm(), ann(), "look", FileSpec::photo(picture()));
    gw.wait(s, "the agent's echo", |s| {
        s.texts(ANN).iter().any(|t| t.starts_with("echo: look"))
    })
    .await;
    gw.stop().await;
    let prompts: Vec<Value> = files
        .entries()
        .into_iter()
        .filter(|e| e.get("prompt").is_some())
        .collect();
    assert_eq!(prompts.len(), 1, "{}", files.summary());
    prompts[0]["blocks"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_goes_as_an_image_block_to_an_agent_that_takes_images() {
    let (s, files) = setup("FAKE_ACP_IMAGES = '1'").await;
    let blocks = photo_to_agent(&s, &files, "/acp spawn fake").await;
    assert_eq!(blocks.len(), 2, "{blocks:#?}");
    assert_eq!(blocks[0]["type"], "text");
    assert!(blocks[0]["text"].as_str().unwrap().starts_with("look"));
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(blocks[1]["mimeType"], "image/jpeg");
    assert_eq!(
        blocks[1]["data"],
        base64::engine::general_purpose::STANDARD.encode(picture())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_image_prompts_gets_the_path_of_a_copy_in_its_folder() {
    let (s, files) = setup("").await;
    let project = s.setup.path("ws").join("project");
    std::fs::create_dir_all(&project).unwrap();
    let blocks = photo_to_agent(&s, &files, "/acp spawn fake --cwd project").await;
    assert_eq!(blocks.len(), 1, "text only: {blocks:#?}");
    let text = blocks[0]["text"].as_str().unwrap();
    let note = "[the picture is at .chela-media/";
    let at = text.find(note).unwrap_or_else(|| panic!("{text}"));
    let name = text[at + note.len()..].split(' ').next().unwrap();
    let copy = project.join(".chela-media").join(name);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        picture(),
        "{}",
        copy.display()
    );
}

/// A photo that arrives while the agent is still working (steered, in a chat run) is not lost
/// in a bound conversation: the agent's turn hands it back and it goes in the next prompt,
/// as an image block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_sent_while_the_agent_works_goes_in_its_next_prompt() {
    let (s, files) = setup("FAKE_ACP_IMAGES = '1'").await;
    let mut gw: Gateway = s.gateway();
    let dm = || ChatSpec::private(ANN);
    s.tg.user_sends(dm(), ann(), "/acp spawn fake");
    gw.wait(&s, "the binding notice", |s| {
        s.texts(ANN).iter().any(|t| t.contains("is bound here"))
    })
    .await;
    s.tg.user_sends(dm(), ann(), "slow 10");
    gw.wait(&s, "the agent at work", |s| {
        s.texts(ANN).iter().any(|t| t.contains("chunk 1/10"))
    })
    .await;
    s.tg.user_sends_file(dm(), ann(), "look", FileSpec::photo(picture()));
    gw.wait(&s, "the agent's echo", |s| {
        s.texts(ANN).iter().any(|t| t.starts_with("echo: look"))
    })
    .await;
    gw.stop().await;
    let prompts: Vec<Value> = files
        .entries()
        .into_iter()
        .filter(|e| e.get("prompt").is_some())
        .collect();
    assert_eq!(prompts.len(), 2, "{}", files.summary());
    let blocks = prompts[1]["blocks"].as_array().unwrap();
    assert!(blocks[0]["text"].as_str().unwrap().starts_with("look"));
    assert_eq!(blocks.len(), 2, "{blocks:#?}");
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(
        blocks[1]["data"],
        base64::engine::general_purpose::STANDARD.encode(picture())
    );
}
