//! `web_search` against the fake Brave and SearXNG endpoints of [`chela_testkit::FakeWeb`].
#![allow(clippy::unwrap_used)]

use chela_testkit::{FakeWeb, Route};
use serde_json::json;

use super::WebSearchTool;
use super::search::{Hit, render};
use crate::agent::tools::Tool;
use crate::agent::tools::test_support::ctx;
use crate::config::{SearchProvider, WebConfig, WebSearchConfig};

fn config(provider: SearchProvider, api_key: &str, base_url: &str) -> WebConfig {
    WebConfig {
        search: WebSearchConfig {
            provider,
            api_key: api_key.to_owned(),
            base_url: base_url.to_owned(),
            ..WebSearchConfig::default()
        },
        ..WebConfig::default()
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

async fn call(tool: &WebSearchTool, args: serde_json::Value) -> crate::agent::tools::ToolOutput {
    tool.call(args, &ctx(std::path::Path::new("/"))).await
}

#[tokio::test]
async fn brave_results_come_back_as_a_numbered_list() {
    let web = FakeWeb::start(vec![]).await.unwrap();
    let cfg = config(SearchProvider::Brave, FakeWeb::BRAVE_KEY, &web.base_url());
    let tool = WebSearchTool::new(&cfg, &no_env);
    let out = call(&tool, json!({"query": "rust async", "count": 2})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        out.text,
        "Results for \"rust async\":\n\
         \n1. rust async result 1\n   https://example.com/1\n   About rust async & more 1\n\
         \n2. rust async result 2\n   https://example.com/2\n   About rust async & more 2\n"
    );
    let hit = &web.hits()[0];
    assert_eq!(hit.path, "/res/v1/web/search");
    assert!(hit.query.contains(&("q".into(), "rust async".into())));
    assert!(hit.query.contains(&("count".into(), "2".into())));
    assert_eq!(hit.headers["x-subscription-token"], FakeWeb::BRAVE_KEY);
}

#[tokio::test]
async fn the_brave_key_comes_from_the_environment_and_never_shows() {
    let web = FakeWeb::start(vec![]).await.unwrap();
    let cfg = config(SearchProvider::Brave, "", &web.base_url());
    let env = |name: &str| (name == "BRAVE_API_KEY").then(|| FakeWeb::BRAVE_KEY.to_owned());
    let out = call(&WebSearchTool::new(&cfg, &env), json!({"query": "x"})).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.text.matches("\n   https://example.com/").count(), 5);

    let wrong = config(SearchProvider::Brave, "wrong-key-12345", &web.base_url());
    let tool = WebSearchTool::new(&wrong, &no_env);
    let out = call(&tool, json!({"query": "x"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("refused the key (HTTP 401"), "{out:?}");
    assert!(!format!("{tool:?}").contains("wrong-key-12345"));
}

#[tokio::test]
async fn brave_without_a_key_names_both_places() {
    let cfg = config(SearchProvider::Brave, "", "");
    let out = call(&WebSearchTool::new(&cfg, &no_env), json!({"query": "x"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("[tools.web.search] api_key"), "{out:?}");
    assert!(out.text.contains("BRAVE_API_KEY"), "{out:?}");
}

#[tokio::test]
async fn searxng_results_and_its_json_switch() {
    let web = FakeWeb::start(vec![]).await.unwrap();
    let cfg = config(SearchProvider::Searxng, "", &format!("{}/", web.base_url()));
    let out = call(
        &WebSearchTool::new(&cfg, &no_env),
        json!({"query": "tokio"}),
    )
    .await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.text.starts_with("Results for \"tokio\":\n\n1. tokio page 1\n   https://searx.example/1\n   Snippet 1 about tokio\n"), "{}", out.text);
    assert_eq!(out.text.matches("page ").count(), 4);
    let out = call(
        &WebSearchTool::new(&cfg, &no_env),
        json!({"query": "tokio", "count": 2}),
    )
    .await;
    assert_eq!(out.text.matches("page ").count(), 2, "{}", out.text);
    let hit = &web.hits()[0];
    assert_eq!(hit.path, "/search");
    assert!(hit.query.contains(&("format".into(), "json".into())));
}

#[tokio::test]
async fn no_provider_is_a_clear_error() {
    let out = call(
        &WebSearchTool::new(&WebConfig::default(), &no_env),
        json!({"query": "x"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.text.starts_with(
            "web_search: no search provider is configured: set [tools.web.search] provider"
        ),
        "{out:?}"
    );
}

#[tokio::test]
async fn an_unreachable_instance_shows_no_credentials() {
    // A port nothing listens on (bound, then closed).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cfg = config(
        SearchProvider::Searxng,
        "",
        &format!("http://user:hunter2@127.0.0.1:{port}"),
    );
    let out = call(&WebSearchTool::new(&cfg, &no_env), json!({"query": "x"})).await;
    assert!(out.is_error);
    assert!(out.text.contains("SearXNG did not answer"), "{out:?}");
    assert!(!out.text.contains("hunter2"), "{out:?}");
}

#[test]
fn an_empty_result_list_says_so() {
    assert_eq!(render("zzz", &[]), "No results for \"zzz\".");
    let hits = [Hit {
        title: String::new(),
        url: "https://a.example/".into(),
        snippet: String::new(),
    }];
    assert_eq!(
        render("q", &hits),
        "Results for \"q\":\n\n1. https://a.example/\n   https://a.example/\n"
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_key_stays_home() {
    let elsewhere = FakeWeb::start(vec![]).await.unwrap();
    let moved = elsewhere.url("/res/v1/web/search");
    let web = FakeWeb::start(vec![("/api/res/v1/web/search", Route::redirect(moved))])
        .await
        .unwrap();
    let cfg = config(SearchProvider::Brave, FakeWeb::BRAVE_KEY, &web.url("/api"));
    let out = call(&WebSearchTool::new(&cfg, &no_env), json!({"query": "x"})).await;
    assert!(out.is_error, "{out:?}");
    assert!(out.text.contains("redirect (HTTP 302"), "{out:?}");
    assert_eq!(web.hit_count("/api/res/v1/web/search"), 1);
    assert!(
        elsewhere
            .hits()
            .iter()
            .all(|h| !h.headers.contains_key("x-subscription-token")),
        "the key went to the redirect's target"
    );
    assert_eq!(elsewhere.hits().len(), 0);
}

#[tokio::test]
async fn brave_over_plain_http_only_to_loopback() {
    for base in [
        "http://search.example",
        "http://10.0.0.5:8080",
        "ftp://x.example",
    ] {
        let cfg = config(SearchProvider::Brave, "k", base);
        let out = call(&WebSearchTool::new(&cfg, &no_env), json!({"query": "x"})).await;
        assert!(out.is_error, "{base}: {out:?}");
        assert!(
            out.text.contains("would send the Brave key in the clear"),
            "{out:?}"
        );
    }
    for base in [
        "https://search.example",
        "http://127.0.0.1:9",
        "http://localhost:9",
        "http://[::1]:9",
    ] {
        let tool = WebSearchTool::new(&config(SearchProvider::Brave, "k", base), &no_env);
        assert!(
            format!("{tool:?}").contains("Ok(Brave {"),
            "{base}: {tool:?}"
        );
    }
}

#[tokio::test]
async fn an_endless_answer_is_refused_after_a_megabyte() {
    let web = FakeWeb::start(vec![("/endless/search", Route::Endless)])
        .await
        .unwrap();
    let cfg = config(SearchProvider::Searxng, "", &web.url("/endless"));
    let tool = WebSearchTool::new(&cfg, &no_env);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        call(&tool, json!({"query": "x"})),
    )
    .await
    .expect("the answer was read without a bound");
    assert!(out.is_error, "{out:?}");
    assert!(
        out.text
            .contains("SearXNG answered more than 1048576 bytes"),
        "{out:?}"
    );
}
