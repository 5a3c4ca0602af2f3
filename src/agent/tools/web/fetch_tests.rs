//! `web_fetch` against [`chela_testkit::FakeWeb`] on 127.0.0.1: redirects checked hop by hop,
//! the address rule on literals and on resolved names, pinning, limits and content types.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use chela_testkit::{FakeWeb, Route};
use serde_json::json;
use tokio::sync::Semaphore;

use super::fetch::{CONVERSIONS_AT_ONCE, MAX_HTML_BYTES, convert_apart};
use super::html::Format;
use super::{Resolver, WebFetchTool};
use crate::agent::tools::test_support::ctx;
use crate::agent::tools::{Tool, ToolOutput};
use crate::config::WebConfig;

fn config(allow_hosts: &[&str]) -> WebConfig {
    WebConfig {
        allow_hosts: allow_hosts.iter().map(|h| (*h).to_owned()).collect(),
        ..WebConfig::default()
    }
}

/// A resolver that knows only `names` (each -> its addresses) and fails for the rest.
fn fake_dns(names: &[(&str, Vec<SocketAddr>)]) -> Resolver {
    let names: Vec<(String, Vec<SocketAddr>)> = names
        .iter()
        .map(|(n, a)| ((*n).to_owned(), a.clone()))
        .collect();
    Arc::new(move |host: String, _port: u16| {
        let found = names
            .iter()
            .find(|(n, _)| *n == host)
            .map(|(_, a)| a.clone());
        Box::pin(async move { found.ok_or_else(|| std::io::Error::other("unknown name")) })
    })
}

async fn fetch(tool: &WebFetchTool, url: &str) -> ToolOutput {
    tool.fetch(url, Format::Markdown, 20_000).await
}

fn html(body: &str) -> Route {
    Route::page("text/html; charset=utf-8", body)
}

fn loopback(port: u16) -> Vec<SocketAddr> {
    vec![SocketAddr::from(([127, 0, 0, 1], port))]
}

#[tokio::test]
async fn a_redirect_to_a_loopback_name_is_refused_mid_chain() {
    let inside = FakeWeb::start(vec![("/secret", html("<p>internal</p>"))])
        .await
        .unwrap();
    let web = FakeWeb::start(vec![
        ("/start", Route::redirect("/hop")),
        (
            "/hop",
            Route::redirect(format!("http://localhost:{}/secret", inside.port())),
        ),
    ])
    .await
    .unwrap();
    // 127.0.0.1 is listed; the name localhost (which resolves to loopback) is not.
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    let out = fetch(&tool, &web.url("/start")).await;
    assert!(out.is_error, "{out:?}");
    assert!(out.text.contains("refused: localhost is "), "{}", out.text);
    assert!(out.text.contains("a loopback address"), "{}", out.text);
    assert_eq!(web.hit_count("/start"), 1);
    assert_eq!(web.hit_count("/hop"), 1);
    assert!(inside.hits().is_empty(), "{:?}", inside.hits());
}

#[tokio::test]
async fn a_redirect_to_a_v4_mapped_literal_is_refused() {
    let inside = FakeWeb::start(vec![("/secret", html("<p>internal</p>"))])
        .await
        .unwrap();
    let web = FakeWeb::start(vec![(
        "/start",
        Route::Redirect {
            status: 307,
            location: format!("http://[::ffff:127.0.0.1]:{}/secret", inside.port()),
        },
    )])
    .await
    .unwrap();
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    let out = fetch(&tool, &web.url("/start")).await;
    assert!(out.is_error, "{out:?}");
    assert!(out.text.contains("::ffff:127.0.0.1"), "{}", out.text);
    assert!(inside.hits().is_empty());
}

#[tokio::test]
async fn loopback_literals_are_refused_unless_allowed() {
    let web = FakeWeb::start(vec![("/page", html("<p>hello there</p>"))])
        .await
        .unwrap();
    let out = fetch(&WebFetchTool::new(&config(&[])), &web.url("/page")).await;
    assert!(out.is_error, "{out:?}");
    assert!(
        out.text.contains("127.0.0.1, a loopback address"),
        "{}",
        out.text
    );
    assert_eq!(web.hit_count("/page"), 0);

    let open = WebConfig {
        allow_private: true,
        ..WebConfig::default()
    };
    let out = fetch(&WebFetchTool::new(&open), &web.url("/page")).await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.text.contains("hello there"), "{}", out.text);
}

#[tokio::test]
async fn the_connection_goes_to_the_checked_addresses() {
    let web = FakeWeb::start(vec![("/page", html("<p>pinned page</p>"))])
        .await
        .unwrap();
    // No real resolver knows these names: reaching the page proves the pinned address is used.
    // `unlisted-loopback.test` resolves to loopback and is not in allow_hosts: refused.
    let dns = fake_dns(&[
        ("pinned.test", loopback(web.port())),
        ("unlisted-loopback.test", loopback(web.port())),
        (
            "mixed.test",
            vec![
                SocketAddr::from(([93, 184, 216, 34], web.port())),
                SocketAddr::from(([169, 254, 169, 254], web.port())),
            ],
        ),
    ]);
    let tool = WebFetchTool::with_resolver(&config(&["pinned.test"]), dns);
    let ok = fetch(&tool, &format!("http://pinned.test:{}/page", web.port())).await;
    assert!(!ok.is_error, "{ok:?}");
    assert!(ok.text.contains("pinned page"), "{}", ok.text);
    let refused = fetch(
        &tool,
        &format!("http://unlisted-loopback.test:{}/page", web.port()),
    )
    .await;
    assert!(
        refused.text.contains("refused: unlisted-loopback.test"),
        "{refused:?}"
    );
    let mixed = fetch(&tool, &format!("http://mixed.test:{}/page", web.port())).await;
    assert!(
        mixed.text.contains("169.254.169.254, a link-local"),
        "{mixed:?}"
    );
    let unknown = fetch(&tool, &format!("http://nowhere.test:{}/", web.port())).await;
    assert!(
        unknown.text.contains("cannot resolve nowhere.test"),
        "{unknown:?}"
    );
    assert_eq!(web.hit_count("/page"), 1);
}

#[tokio::test]
async fn redirects_are_followed_up_to_five() {
    let web = FakeWeb::start(vec![
        ("/r1", Route::redirect("/r2")),
        ("/r2", Route::redirect("/r3")),
        ("/r3", Route::redirect("/r4")),
        ("/r4", Route::redirect("/r5")),
        ("/r5", Route::redirect("/end")),
        ("/end", html("<p>arrived</p>")),
        ("/loop", Route::redirect("/loop")),
    ])
    .await
    .unwrap();
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    let out = fetch(&tool, &web.url("/r1")).await;
    assert!(!out.is_error, "{out:?}");
    assert!(
        out.text.starts_with(&format!("URL: {}\n", web.url("/end"))),
        "{}",
        out.text
    );
    assert!(out.text.contains("arrived"));
    let out = fetch(&tool, &web.url("/loop")).await;
    assert!(
        out.text.contains("too many redirects (more than 5)"),
        "{out:?}"
    );
    assert_eq!(web.hit_count("/loop"), 6);
}

#[tokio::test]
async fn only_http_and_https_are_fetched() {
    let web = FakeWeb::start(vec![("/file", Route::redirect("file:///etc/passwd"))])
        .await
        .unwrap();
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    for url in ["file:///etc/passwd", "ftp://example.com/x", "not a url"] {
        let out = fetch(&tool, url).await;
        assert!(out.is_error, "{url}: {out:?}");
    }
    let out = fetch(&tool, &web.url("/file")).await;
    assert!(
        out.text
            .contains("file:///etc/passwd is not an http(s) URL"),
        "{out:?}"
    );
}

#[tokio::test]
async fn the_body_stops_at_max_bytes_and_says_so() {
    let web = FakeWeb::start(vec![("/endless", Route::Endless)])
        .await
        .unwrap();
    let small = WebConfig {
        max_bytes: 5000,
        ..config(&["127.0.0.1"])
    };
    let out = fetch(&WebFetchTool::new(&small), &web.url("/endless")).await;
    assert!(!out.is_error, "{out:?}");
    let body = out.text.split("\n\n").nth(1).unwrap();
    assert_eq!(body, "a".repeat(5000));
    assert!(
        out.text
            .ends_with("[cut: the page is larger than 5000 bytes; only its start was read]"),
        "{}",
        &out.text[out.text.len() - 200..]
    );
}

#[tokio::test]
async fn max_chars_cuts_the_text_and_says_so() {
    let text = "word ".repeat(100);
    let web = FakeWeb::start(vec![("/t", Route::page("text/plain", text))])
        .await
        .unwrap();
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    let out = tool
        .call(
            json!({"url": web.url("/t"), "max_chars": 12}),
            &ctx(std::path::Path::new("/")),
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(
        out.text
            .contains("\n\nword word wo\n\n[truncated: 12 of 500 chars shown]"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn content_types_decide_how_a_body_is_read() {
    let web = FakeWeb::start(vec![
        ("/json", Route::page("application/json", r#"{"a": [1, 2]}"#)),
        (
            "/plain",
            Route::page("text/plain; charset=utf-8", "<b>not html</b>"),
        ),
        (
            "/png",
            Route::page("image/png", vec![0x89, b'P', b'N', b'G', 0, 0]),
        ),
        (
            "/bare-html",
            Route::Page {
                content_type: None,
                body: b"<!DOCTYPE html><title>T</title><p>sniffed</p>".to_vec(),
            },
        ),
        (
            "/bare-binary",
            Route::Page {
                content_type: None,
                body: vec![0, 159, 146, 150],
            },
        ),
        ("/missing", Route::Status(404)),
    ])
    .await
    .unwrap();
    let tool = WebFetchTool::new(&config(&["127.0.0.1"]));
    let json = fetch(&tool, &web.url("/json")).await;
    assert!(json.text.ends_with("\n\n{\"a\": [1, 2]}"), "{json:?}");
    let plain = fetch(&tool, &web.url("/plain")).await;
    assert!(plain.text.ends_with("\n\n<b>not html</b>"), "{plain:?}");
    let png = fetch(&tool, &web.url("/png")).await;
    assert!(png.is_error);
    assert!(
        png.text.contains("unsupported content type \"image/png\""),
        "{png:?}"
    );
    let sniffed = fetch(&tool, &web.url("/bare-html")).await;
    assert!(sniffed.text.contains("Title: T\n\nsniffed"), "{sniffed:?}");
    let binary = fetch(&tool, &web.url("/bare-binary")).await;
    assert!(binary.is_error, "{binary:?}");
    let missing = fetch(&tool, &web.url("/missing")).await;
    assert!(missing.is_error);
    assert!(missing.text.ends_with("HTTP 404 Not Found"), "{missing:?}");
}

#[tokio::test]
async fn a_page_that_never_answers_times_out() {
    let web = FakeWeb::start(vec![("/stall", Route::Stall)])
        .await
        .unwrap();
    let quick = WebConfig {
        timeout_s: 1,
        ..config(&["127.0.0.1"])
    };
    let out = fetch(&WebFetchTool::new(&quick), &web.url("/stall")).await;
    assert!(out.is_error);
    assert!(out.text.ends_with("timed out after 1 s"), "{out:?}");
}

#[tokio::test]
async fn bad_arguments_are_refused() {
    let tool = WebFetchTool::new(&config(&[]));
    let c = ctx(std::path::Path::new("/"));
    let out = tool.call(json!({}), &c).await;
    assert!(
        out.text.contains("missing required string argument `url`"),
        "{out:?}"
    );
    let out = tool
        .call(json!({"url": "http://x.test/", "format": "pdf"}), &c)
        .await;
    assert!(out.text.contains("\"markdown\" or \"text\""), "{out:?}");
    let out = tool
        .call(json!({"url": "http://x.test/", "max_chars": 0}), &c)
        .await;
    assert!(out.text.contains("at least 1"), "{out:?}");
}

/// Converts `html` within `slots`, failing the test if it takes more than 20 s (it takes
/// milliseconds when the guard works; before, these bodies took a core for minutes or hours).
async fn convert_guarded(html: String, slots: &Arc<Semaphore>) -> super::html::Page {
    let convert = convert_apart(html, Format::Markdown, slots);
    tokio::time::timeout(Duration::from_secs(20), convert)
        .await
        .expect("the conversion did not finish")
}

#[tokio::test]
async fn pathological_bodies_are_refused_before_parsing() {
    let slots = Arc::new(Semaphore::new(CONVERSIONS_AT_ONCE));
    let unclosed = "<a".repeat(1_000_000);
    let mismatched = "<div></span>".repeat(80_000);
    for body in [unclosed, mismatched] {
        let page = convert_guarded(body, &slots).await;
        assert!(page.text.starts_with("(not converted"), "{}", page.text);
    }
}

#[tokio::test]
async fn a_third_conversion_waits_for_a_slot() {
    let slots = Arc::new(Semaphore::new(CONVERSIONS_AT_ONCE));
    let busy = Arc::clone(&slots).acquire_many_owned(2).await.unwrap();
    let third = convert_apart("<p>third</p>".into(), Format::Markdown, &slots);
    let mut third = std::pin::pin!(third);
    // Polled once, the third either queues for a slot or, were there no limit, converts.
    let first = std::future::poll_fn(|cx| Poll::Ready(third.as_mut().poll(cx))).await;
    assert!(first.is_pending());
    // Freeing both slots hands one to the conversion queued for it at once (the semaphore
    // serves its queue as it is released): one that did not wait would leave both free.
    drop(busy);
    assert_eq!(
        slots.available_permits(),
        CONVERSIONS_AT_ONCE - 1,
        "the third conversion did not wait for a slot"
    );
    let page = tokio::time::timeout(Duration::from_secs(20), third)
        .await
        .unwrap();
    assert_eq!(page.text, "third");
}

#[tokio::test]
async fn html_beyond_a_megabyte_is_cut_before_converting() {
    let big = format!("<p>start</p>{}", "<p>filler text</p>".repeat(70_000));
    assert!(big.len() > MAX_HTML_BYTES);
    let web = FakeWeb::start(vec![("/big", html(&big))]).await.unwrap();
    let out = fetch(
        &WebFetchTool::new(&config(&["127.0.0.1"])),
        &web.url("/big"),
    )
    .await;
    assert!(out.text.contains("start"), "{}", &out.text[..200]);
    let note = format!("[cut: only the first {MAX_HTML_BYTES} bytes of the HTML were converted]");
    assert!(
        out.text.contains(&note),
        "{}",
        &out.text[out.text.len() - 300..]
    );
}

#[tokio::test]
async fn the_timeout_covers_the_conversion() {
    let web = FakeWeb::start(vec![("/p", html("<p>hello</p>"))])
        .await
        .unwrap();
    let quick = WebConfig {
        timeout_s: 1,
        ..config(&["127.0.0.1"])
    };
    let no_slot = Arc::new(Semaphore::new(0));
    let tool = WebFetchTool::new(&quick).with_slots(no_slot);
    let out = tokio::time::timeout(Duration::from_secs(20), fetch(&tool, &web.url("/p")))
        .await
        .expect("the conversion was not under the deadline");
    assert!(out.is_error);
    assert!(out.text.ends_with("timed out after 1 s"), "{out:?}");
}
