//! The `browser` tool against headless Chromium (the distribution's, as the panel tests use)
//! and the test kit's [`FakeWeb`]: a page's outline with references, a click and a typed
//! search by reference, the page's text, a screenshot saved in the workspace, and the
//! private-address rule enforced by the browser's proxy on every request a page makes.

use std::time::Duration;

use chela::agent::tools::browser::BrowserTool;
use chela::agent::tools::browser::engine::Engine;
use chela::agent::tools::browser::launch::{LaunchSettings, executable};
use chela::agent::tools::web::system_resolver;
use chela::agent::tools::{Tool, ToolContext, ToolOutput};
use chela::config::{BrowserConfig, WebConfig};
use chela::sandbox::ChildSandbox;
use chela_testkit::{FakeWeb, Route};
use serde_json::json;

const HOME: &str = r#"<!doctype html><html><head><title>Harbour news</title></head><body>
<h1>Harbour news</h1>
<p>The bridge reopens on Monday.</p>
<a href="/second">Read more</a>
<form action="/find" method="get"><input name="q" aria-label="Search"><button type="submit">Go</button></form>
</body></html>"#;

const SECOND: &str = "<!doctype html><html><head><title>Second page</title></head><body><h1>More about the bridge</h1></body></html>";

/// Whether Chromium is here; without it the test is skipped, except under CI.
fn chromium_or_skip() -> bool {
    if executable(&BrowserConfig::default()).is_ok() {
        return true;
    }
    let ci = std::env::var_os("CHELA_CI").is_some_and(|v| !v.is_empty());
    assert!(!ci, "chromium is not installed (CHELA_CI is set)");
    eprintln!("!! browser tests not run: install chromium (CHELA_CI=1 makes this fail) !!");
    false
}

async fn site(secret_page: &str) -> FakeWeb {
    let html = |body: &str| Route::page("text/html; charset=utf-8", body.as_bytes().to_vec());
    FakeWeb::start(vec![
        ("/", html(HOME)),
        ("/second", html(SECOND)),
        (
            "/find",
            html("<html><head><title>Results</title></head><body><p>3 results</p></body></html>"),
        ),
        ("/embeds", html(secret_page)),
        ("/secret", html("<p>internal</p>")),
    ])
    .await
    .expect("start the fake site")
}

fn tool(web: WebConfig) -> BrowserTool {
    let settings = LaunchSettings {
        browser: BrowserConfig {
            timeout_s: 20,
            ..BrowserConfig::default()
        },
        web,
        resolve: system_resolver(),
        sandbox: ChildSandbox::default(),
        forbidden: Vec::new(),
    };
    BrowserTool::new(std::sync::Arc::new(Engine::new(settings)))
}

fn ctx(dir: &std::path::Path) -> ToolContext {
    ToolContext {
        workspace: dir.to_path_buf(),
        cancel: Default::default(),
        exec_timeout: Duration::from_secs(30),
        max_output_chars: 20_000,
        session_key: "agent:main:telegram:direct:42".into(),
        run_id: String::new(),
        exec: Default::default(),
        reply_to: None,
        events: None,
    }
}

async fn call(tool: &BrowserTool, ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
    tool.call(args, ctx).await
}

/// The reference the outline gives the line containing `needle`.
fn reference(outline: &str, needle: &str) -> String {
    let line = outline
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in {outline}"));
    let start = line
        .find("[ref=")
        .unwrap_or_else(|| panic!("no reference on {line:?}"))
        + 5;
    line[start..].trim_end_matches(']').to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reads_clicks_types_and_sees_a_page() {
    if !chromium_or_skip() {
        return;
    }
    let web = site("").await;
    let dir = tempfile::tempdir().unwrap();
    let tool = tool(WebConfig {
        allow_hosts: vec!["127.0.0.1".into()],
        ..WebConfig::default()
    });
    let ctx = ctx(dir.path());

    let page = call(
        &tool,
        &ctx,
        json!({"action": "navigate", "url": web.url("/")}),
    )
    .await;
    assert!(!page.is_error, "{page:?}");
    assert!(page.text.starts_with("Harbour news ("), "{}", page.text);
    assert!(
        page.text.contains("heading \"Harbour news\""),
        "{}",
        page.text
    );
    let more = reference(&page.text, "link \"Read more\"");

    let clicked = call(&tool, &ctx, json!({"action": "click", "ref": more})).await;
    assert!(!clicked.is_error, "{clicked:?}");
    assert!(
        clicked.text.contains("More about the bridge"),
        "{}",
        clicked.text
    );
    assert_eq!(web.hit_count("/second"), 1);

    let stale = call(&tool, &ctx, json!({"action": "click", "ref": "e99"})).await;
    assert!(
        stale.is_error && stale.text.contains("take a snapshot"),
        "{stale:?}"
    );

    let home = call(
        &tool,
        &ctx,
        json!({"action": "navigate", "url": web.url("/")}),
    )
    .await;
    let search = reference(&home.text, "textbox \"Search\"");
    let typed = call(
        &tool,
        &ctx,
        json!({"action": "type", "ref": search, "text": "bridge works", "submit": true}),
    )
    .await;
    assert!(!typed.is_error, "{typed:?}");
    let hits = web.hits();
    let query = hits
        .iter()
        .find(|h| h.path == "/find")
        .expect("the form was submitted");
    assert!(
        query
            .query
            .contains(&("q".to_string(), "bridge works".to_string())),
        "{query:?}"
    );

    let text = call(&tool, &ctx, json!({"action": "text"})).await;
    assert!(text.text.contains("3 results"), "{text:?}");

    let shot = call(&tool, &ctx, json!({"action": "screenshot"})).await;
    assert!(!shot.is_error, "{shot:?}");
    assert_eq!(shot.images.len(), 1);
    let png = std::fs::read(dir.path().join(&shot.images[0])).unwrap();
    assert!(png.starts_with(b"\xff\xd8\xff"), "a JPEG in the workspace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_for_the_page_and_everything_it_loads() {
    if !chromium_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    // Loopback is refused by default, before the browser goes there.
    let web = site("").await;
    let refused = call(
        &tool(WebConfig::default()),
        &ctx,
        json!({"action": "navigate", "url": web.url("/")}),
    )
    .await;
    assert!(
        refused.is_error && refused.text.contains("loopback"),
        "{refused:?}"
    );
    assert_eq!(web.hit_count("/"), 0);

    // A page on an opened name ("localhost") that pulls in a loopback address the rule does
    // not open: the proxy refuses the image, the iframe and the script's fetch.
    let port_holder = site("").await;
    let secret = format!("http://127.0.0.1:{}/secret", port_holder.port());
    let embeds = format!(
        "<html><head><title>Embeds</title></head><body><h1>Embeds</h1><img src=\"{secret}\"><iframe src=\"{secret}\"></iframe>\
         <script>fetch('{secret}').catch(() => {{}})</script></body></html>"
    );
    let web = site(&embeds).await;
    let guarded = tool(WebConfig {
        allow_hosts: vec!["localhost".into()],
        ..WebConfig::default()
    });
    let url = format!("http://localhost:{}/embeds", web.port());
    let page = call(&guarded, &ctx, json!({"action": "navigate", "url": url})).await;
    assert!(!page.is_error, "{page:?}");
    assert!(page.text.contains("Embeds"), "{}", page.text);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        port_holder.hit_count("/secret"),
        0,
        "nothing reached the loopback address"
    );
    assert_eq!(web.hit_count("/secret"), 0);

    // The control: with that address opened too, the same page reaches it.
    let open = tool(WebConfig {
        allow_hosts: vec!["localhost".into(), "127.0.0.1".into()],
        ..WebConfig::default()
    });
    let page = call(&open, &ctx, json!({"action": "navigate", "url": url})).await;
    assert!(!page.is_error, "{page:?}");
    let mut waited = 0;
    while port_holder.hit_count("/secret") == 0 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert!(
        port_holder.hit_count("/secret") > 0,
        "the opened address is reached"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_reaches_a_vision_model_with_the_tool_result() {
    if !chromium_or_skip() {
        return;
    }
    let web = site("").await;
    let setup = crate::common::Setup::start(
        crate::common::Provider::OpenAi,
        "steer",
        200,
        "vision = \"on\"",
    )
    .await;
    let mut config = std::fs::read_to_string(setup.config()).unwrap();
    config.push_str("\n[tools.web]\nallow_hosts = [\"127.0.0.1\"]\n");
    std::fs::write(setup.config(), config).unwrap();
    let calls = json!([
        {"name": "browser", "arguments": {"action": "navigate", "url": web.url("/")}},
        {"name": "browser", "arguments": {"action": "screenshot"}},
    ]);
    let (status, out) = setup.agent_json(&format!("tools {calls}")).await;
    assert!(status.success(), "{out}");
    let requests = setup.model_calls();
    let after = requests
        .last()
        .expect("the model was asked again after the calls");
    let messages = after["messages"].as_array().unwrap();
    let tools: Vec<&serde_json::Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2, "{messages:#?}");
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .contains("Harbour news"),
        "{:?}",
        tools[0]
    );
    let last = messages.last().unwrap();
    assert_eq!(
        last["role"], "user",
        "the image follows the tool messages: {last}"
    );
    let url = last["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap_or_default();
    assert!(
        url.starts_with("data:image/jpeg;base64,/9j/"),
        "a PNG: {}",
        &url[..url.len().min(60)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webrtc_sends_no_udp_around_the_proxy() {
    if !chromium_or_skip() {
        return;
    }
    let stun = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = stun.local_addr().unwrap().port();
    let page = format!(
        "<html><head><title>RTC</title></head><body><h1>RTC</h1><script>\
         const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{port}'}}]}});\
         pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o));\
         </script></body></html>"
    );
    let web = site(&page).await;
    let dir = tempfile::tempdir().unwrap();
    let tool = tool(WebConfig {
        allow_hosts: vec!["127.0.0.1".into()],
        ..WebConfig::default()
    });
    let out = call(
        &tool,
        &ctx(dir.path()),
        json!({"action": "navigate", "url": web.url("/embeds")}),
    )
    .await;
    assert!(!out.is_error, "{out:?}");
    let mut buf = [0u8; 1500];
    let got = tokio::time::timeout(Duration::from_secs(2), stun.recv_from(&mut buf)).await;
    assert!(got.is_err(), "a STUN packet reached 127.0.0.1 over UDP");
}
