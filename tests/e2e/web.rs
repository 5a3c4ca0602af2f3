//! End-to-end, `web_fetch` through `chela gateway` and the Telegram fake: the fake model calls
//! the tool on a news article served by the test kit's [`FakeWeb`] (opened with
//! `[tools.web] allow_hosts`), the model receives the article's text (not its scripts), and
//! the chat receives the answer built on it. A group, on the default `minimal` profile, is not
//! offered the web tools at all.

use crate::common;

use std::path::Path;

use chela_testkit::{ChatSpec, FakeWeb, Route, UserSpec};
use common::telegram::{TgConfig, TgSetup, at_bot, dm};

fn offered(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the tool results in a model request.
fn tool_results(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_fetches_a_page_and_the_chat_gets_its_text() {
    let article = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/web/news_article.html"),
    )
    .unwrap();
    let web = FakeWeb::start(vec![(
        "/news/harbour-bridge",
        Route::page("text/html", article),
    )])
    .await
    .unwrap();
    let s = TgSetup::with(TgConfig {
        telegram: "allow_from = [\"42\"]\ngroup_policy = \"open\"",
        tables: "[tools.web]\nallow_hosts = [\"127.0.0.1\"]\n",
        ..TgConfig::default()
    })
    .await;
    let mut gw = s.gateway();
    let (chat, ann) = dm(42, "Ann");
    let url = web.url("/news/harbour-bridge");
    s.tg.user_sends(chat, ann, &format!(r#"tool web_fetch {{"url": "{url}"}}"#));
    gw.wait(&s, "the answer", |s| {
        s.texts(42)
            .iter()
            .any(|t| t.contains("# Harbour bridge reopens after two-year repair"))
    })
    .await;
    let group = ChatSpec::group(-5001, "Team");
    s.tg.user_sends(
        group,
        UserSpec::new(7, "Bo"),
        &format!("{} tool web_fetch {{\"url\": \"{url}\"}}", at_bot()),
    );
    gw.wait(&s, "the group's answer", |s| {
        s.texts(-5001).iter().any(|t| t.contains("not allowed"))
    })
    .await;
    gw.stop().await;

    let answer = s.texts(42).join("\n");
    assert!(answer.contains(&format!("URL: {url}")), "{answer}");
    assert!(
        answer.contains("# Harbour bridge reopens after two-year repair"),
        "{answer}"
    );
    let calls = s.setup.model_calls();
    assert!(offered(&calls[0]).contains(&"web_fetch".to_owned()));
    assert!(offered(&calls[0]).contains(&"web_search".to_owned()));
    let results = tool_results(&calls[1]).join("\n");
    assert!(
        results.contains("ending two years of closures"),
        "{results}"
    );
    assert!(
        results.contains("**£3.2 million under budget**"),
        "{results}"
    );
    assert!(!results.contains("TRACKING-ID"), "{results}");
    assert!(!results.contains("Win a cruise"), "{results}");
    assert_eq!(web.hit_count("/news/harbour-bridge"), 1);

    // The group (minimal profile) was offered no tools, and its call was refused.
    // The DM's two calls (directive, tool result) came before the group's.
    assert_eq!(calls.len(), 4, "{calls:#?}");
    assert!(offered(&calls[2]).is_empty(), "{:?}", offered(&calls[2]));
    let group_answer = s.texts(-5001).join("\n");
    assert!(group_answer.contains("not allowed"), "{group_answer}");
}
