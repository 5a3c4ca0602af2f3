//! The web tools through chela's public API against the test kit's [`FakeWeb`] on 127.0.0.1
//! (opened with `allow_hosts`): real-world-shaped pages from `tests/fixtures/web/` (a news
//! article full of furniture, a docs page with code and a table), the private-address rule,
//! and `web_search` against the fake Brave and SearXNG endpoints.

use std::path::Path;

use chela::agent::tools::web::html::Format;
use chela::agent::tools::web::{WebFetchTool, WebSearchTool};
use chela::config::{SearchProvider, WebConfig, WebSearchConfig};
use chela_testkit::{FakeWeb, Route};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/web")
            .join(name),
    )
    .expect("read fixture")
}

async fn site() -> FakeWeb {
    let html = |name| Route::page("text/html; charset=utf-8", fixture(name));
    FakeWeb::start(vec![
        ("/news/harbour-bridge", html("news_article.html")),
        ("/docs/configuration.html", html("docs_page.html")),
        ("/short", Route::redirect("/news/harbour-bridge")),
    ])
    .await
    .expect("start the fake site")
}

fn allowed() -> WebConfig {
    WebConfig {
        allow_hosts: vec!["127.0.0.1".to_owned()],
        ..WebConfig::default()
    }
}

#[tokio::test]
async fn a_news_article_comes_back_as_its_text_without_the_furniture() {
    let web = site().await;
    let tool = WebFetchTool::new(&allowed());
    let out = tool
        .fetch(&web.url("/short"), Format::Markdown, 20_000)
        .await;
    assert!(!out.is_error, "{out:?}");
    let text = &out.text;
    let head = format!(
        "URL: {}\nTitle: Harbour bridge reopens after two-year repair | The Coastal Herald\n\n\
         # Harbour bridge reopens after two-year repair\n",
        web.url("/news/harbour-bridge")
    );
    assert!(text.starts_with(&head), "{text}");
    for kept in [
        "By [Mira Okafor](/authors/mira-okafor), Transport correspondent",
        "ending two years of closures",
        "**£3.2 million under budget**",
        "## What changes for drivers",
        "- Toll-free crossings continue until 31 May.\n- Bus route 7",
        "> \"It is a relief to have our town joined up again,\"",
        "walking opening of the footpath on Sunday at 10am.",
        "The first cars crossed the bridge shortly after 6am.",
    ] {
        assert!(text.contains(kept), "{kept:?} missing:\n{text}");
    }
    for dropped in [
        "TRACKING-ID",
        "INJECTED-BY-SCRIPT",
        "schema.org",
        "font-family",
        "We use cookies",
        "Sport",
        "Mortgage rates",
        "Win a cruise",
        "Share on X",
        "Related",
        "Comments (148)",
        "Most read",
        "morning briefing",
        "Media Group",
        "Search the Herald",
    ] {
        assert!(!text.contains(dropped), "{dropped:?} kept:\n{text}");
    }

    let plain = tool
        .fetch(&web.url("/news/harbour-bridge"), Format::Text, 20_000)
        .await;
    assert!(
        plain
            .text
            .contains("By Mira Okafor, Transport correspondent"),
        "{}",
        plain.text
    );
    assert!(!plain.text.contains("](/"), "{}", plain.text);
}

#[tokio::test]
async fn a_docs_page_keeps_its_code_and_table() {
    let web = site().await;
    let tool = WebFetchTool::new(&allowed());
    let out = tool
        .fetch(
            &web.url("/docs/configuration.html"),
            Format::Markdown,
            20_000,
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    let text = &out.text;
    assert!(
        text.contains("Title: Configuration - tidewatch 2.4 documentation\n\n# Configuration\n"),
        "{text}"
    );
    let code = "```rust\nuse tidewatch::Config;\n\nfn main() -> Result<(), tidewatch::Error> {\n    \
                let config = Config::load(\"tidewatch.toml\")?;\n";
    assert!(text.contains(code), "{text}");
    assert!(
        text.contains("```sh\nTIDEWATCH_STATION=pier-3 tidewatch run\n```"),
        "{text}"
    );
    assert!(text.contains("| Key "), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("`alert_level_m`"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(
        cells,
        [
            "",
            "`alert_level_m`",
            "4.5",
            "Water level that raises an alert",
            ""
        ],
        "{text}"
    );
    assert!(text.contains("Keys are case-sensitive."), "{text}");
    for dropped in [
        "DOCUMENTATION_OPTIONS",
        "THEME-PREF",
        "Installation",
        "On this page",
        "API reference",
        "Built with",
        "¶",
    ] {
        assert!(!text.contains(dropped), "{dropped:?} kept:\n{text}");
    }
}

#[tokio::test]
async fn the_same_pages_are_refused_without_the_allowance() {
    let web = site().await;
    let tool = WebFetchTool::new(&WebConfig::default());
    let out = tool
        .fetch(&web.url("/news/harbour-bridge"), Format::Markdown, 20_000)
        .await;
    assert!(out.is_error);
    assert!(
        out.text.contains("127.0.0.1, a loopback address"),
        "{}",
        out.text
    );
    assert!(web.hits().is_empty());
}

fn search_config(provider: SearchProvider, api_key: &str, base_url: &str) -> WebConfig {
    WebConfig {
        search: WebSearchConfig {
            provider,
            api_key: api_key.to_owned(),
            base_url: base_url.to_owned(),
            count: 3,
        },
        ..WebConfig::default()
    }
}

#[tokio::test]
async fn web_search_over_brave_searxng_and_none() {
    let web = FakeWeb::start(vec![]).await.unwrap();
    let env = |name: &str| (name == "BRAVE_API_KEY").then(|| FakeWeb::BRAVE_KEY.to_owned());
    let brave = WebSearchTool::new(
        &search_config(SearchProvider::Brave, "", &web.base_url()),
        &env,
    );
    let hits = brave.search("harbour bridge", 3).await.unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0].title, "harbour bridge result 1");
    assert_eq!(hits[0].snippet, "About harbour bridge & more 1");

    let searx = WebSearchTool::new(
        &search_config(SearchProvider::Searxng, "", &web.base_url()),
        &|_| None,
    );
    let hits = searx.search("tides", 3).await.unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[2].url, "https://searx.example/3");

    let none = WebSearchTool::new(&WebConfig::default(), &|_| None);
    let err = none.search("x", 3).await.unwrap_err();
    assert!(err.contains("[tools.web.search] provider"), "{err}");
}
