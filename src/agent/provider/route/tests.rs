//! The router over scripted providers: fallbacks in order, key rotation, rests, and no
//! fallback once a model has answered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;

use super::catalog::{Catalog, Named};
use super::*;
use crate::config::Thinking;
use crate::domain::message::{StopReason, Usage};

/// What a scripted call does.
#[derive(Clone)]
enum Step {
    /// Answers `text`.
    Answer(&'static str),
    /// Fails with this HTTP status.
    Status(u16),
    /// Fails with this status and `retry-after`.
    Later(u16, u64),
    /// Sends `text`, then the stream breaks.
    Breaks(&'static str),
    /// The server cannot be reached.
    Refused,
}

/// A provider answering by its script (then `ok`), recording each call's model.
struct Scripted {
    model: String,
    script: Mutex<VecDeque<Step>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn provider(steps: &[Step], calls: &Arc<Mutex<Vec<String>>>) -> Arc<dyn Provider> {
        Arc::new(Scripted {
            model: "default".into(),
            script: Mutex::new(steps.iter().cloned().collect()),
            calls: calls.clone(),
        })
    }
}

fn events(items: Vec<Result<ProviderEvent, ProviderError>>) -> EventStream {
    Box::pin(futures_util::stream::iter(items))
}

fn done() -> ProviderEvent {
    ProviderEvent::Done {
        stop_reason: StopReason::Stop,
        usage: Usage::default(),
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        self.calls
            .lock()
            .unwrap()
            .push(request.model.unwrap_or_default());
        let step = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Step::Answer("ok"));
        let status = |status, retry_after| ProviderError::Status {
            status,
            message: "scripted".into(),
            retry_after,
        };
        let result = match step {
            Step::Answer(text) => Ok(events(vec![
                Ok(ProviderEvent::TextDelta(text.into())),
                Ok(done()),
            ])),
            Step::Status(code) => Err(status(code, None)),
            Step::Later(code, secs) => Err(status(code, Some(secs))),
            Step::Breaks(text) => Ok(events(vec![
                Ok(ProviderEvent::TextDelta(text.into())),
                Err(ProviderError::Stream("cut".into())),
            ])),
            Step::Refused => Err(ProviderError::Connect {
                url: "http://127.0.0.1:9".into(),
                reason: "refused".into(),
            }),
        };
        Box::pin(async move { result })
    }
}

/// Calls recorded per provider key: `a` (keys a1, a2 when `two_keys`) and `b`.
struct Rig {
    router: ModelRouter,
    a: Vec<Arc<Mutex<Vec<String>>>>,
    b: Arc<Mutex<Vec<String>>>,
}

fn rig(a_keys: &[&[Step]], b: &[Step], fallbacks: &[&str]) -> Rig {
    let a_calls: Vec<_> = a_keys
        .iter()
        .map(|_| Arc::new(Mutex::new(Vec::new())))
        .collect();
    let b_calls = Arc::new(Mutex::new(Vec::new()));
    let a_slots = a_keys
        .iter()
        .zip(&a_calls)
        .map(|(s, c)| Scripted::provider(s, c))
        .collect();
    let catalog = Catalog::of(vec![
        Named::new("a", a_slots).unwrap(),
        Named::new("b", vec![Scripted::provider(b, &b_calls)]).unwrap(),
    ]);
    let fallbacks: Vec<String> = fallbacks.iter().map(|f| f.to_string()).collect();
    let router = ModelRouter::new(Arc::new(catalog), "a", "a/m1", &fallbacks, 2).unwrap();
    Rig {
        router,
        a: a_calls,
        b: b_calls,
    }
}

fn request() -> ProviderRequest {
    ProviderRequest {
        system: String::new(),
        messages: Vec::new(),
        tools: Vec::new(),
        max_tokens: 10,
        model: None,
        thinking: Thinking::Off,
        show_reasoning: false,
        cache_key: None,
    }
}

/// The call's `Answered` and text, or its error.
async fn call(
    router: &ModelRouter,
    model: Option<&str>,
) -> Result<(Answered, String), ProviderError> {
    let mut req = request();
    req.model = model.map(str::to_owned);
    let mut stream = router.stream(req).await?;
    let Some(Ok(ProviderEvent::Answered(answered))) = stream.next().await else {
        panic!("no Answered first");
    };
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(ProviderEvent::TextDelta(t)) => text.push_str(&t),
            Ok(_) => {}
            Err(e) => text.push_str(&format!("<{e}>")),
        }
    }
    Ok((answered, text))
}

fn calls(c: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    c.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn the_first_model_answers_when_it_can() {
    let rig = rig(&[&[]], &[], &["b/m2"]);
    let (answered, text) = call(&rig.router, None).await.unwrap();
    assert_eq!(
        (answered.provider.as_str(), answered.model.as_str()),
        ("a", "m1")
    );
    assert!(answered.skipped.is_empty());
    assert_eq!(text, "ok");
    assert_eq!(calls(&rig.a[0]), ["m1"]);
    assert!(calls(&rig.b).is_empty());
}

#[tokio::test(start_paused = true)]
async fn each_fixable_failure_falls_back_and_the_failed_model_rests() {
    for (step, why) in [
        (Step::Status(503), "overloaded (503)"),
        (Step::Status(529), "overloaded (529)"),
        (Step::Status(500), "server error (500)"),
        (Step::Refused, "unreachable"),
        (Step::Status(401), "key refused (401)"),
        (Step::Status(404), "model not found (404)"),
    ] {
        // Three failures: the first call and its two retries (none for 401 and 404).
        let rig = rig(&[&[step.clone(), step.clone(), step]], &[], &["b/m2"]);
        let start = tokio::time::Instant::now();
        let (answered, text) = call(&rig.router, None).await.unwrap();
        assert_eq!(answered.model, "m2", "{why}");
        assert_eq!(answered.skipped, [format!("a/m1: {why}")]);
        assert_eq!(text, "ok");
        let retried = !why.starts_with("key") && !why.starts_with("model");
        assert_eq!(calls(&rig.a[0]).len(), if retried { 3 } else { 1 }, "{why}");
        // Retries wait 0.5 s then 1 s.
        let waited = if retried { 1500 } else { 0 };
        assert_eq!(start.elapsed(), Duration::from_millis(waited), "{why}");
        // The next call skips the resting model at once.
        let (again, _) = call(&rig.router, None).await.unwrap();
        assert_eq!(again.model, "m2");
        assert_eq!(again.skipped, ["a/m1: resting after failing"]);
        assert_eq!(calls(&rig.a[0]).len(), if retried { 3 } else { 1 });
    }
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_moves_on_at_once_and_a_rest_ends() {
    let rig = rig(&[&[Step::Later(429, 30)]], &[], &["b/m2"]);
    let start = tokio::time::Instant::now();
    let (answered, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(answered.model, "m2");
    assert_eq!(answered.skipped, ["a/m1: rate limited (429)"]);
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The key rests the 30 s the server asked for; then the first model answers again.
    tokio::time::sleep(Duration::from_secs(31)).await;
    let (back, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(back.model, "m1");
    assert!(back.skipped.is_empty());
}

#[tokio::test(start_paused = true)]
async fn keys_rotate_on_429_and_401_before_any_fallback() {
    let rig = rig(
        &[&[Step::Later(429, 45)], &[Step::Status(401)], &[]],
        &[],
        &["b/m2"],
    );
    let (answered, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(
        (answered.provider.as_str(), answered.model.as_str()),
        ("a", "m1")
    );
    assert!(answered.skipped.is_empty());
    assert_eq!(
        rig.a.iter().map(|c| calls(c).len()).collect::<Vec<_>>(),
        [1, 1, 1]
    );
    // The third key goes on answering; the others rest.
    call(&rig.router, None).await.unwrap();
    assert_eq!(
        rig.a.iter().map(|c| calls(c).len()).collect::<Vec<_>>(),
        [1, 1, 2]
    );
    let lines = rig.router.route_lines(None);
    assert_eq!(lines[0], "Fallbacks: b/m2");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("a key 1 rests 45 s more: rate limited")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("a key 2 rests 600 s more: key refused")),
        "{lines:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn without_fallbacks_a_429_is_retried_as_before_and_its_error_returned() {
    let rig = rig(
        &[&[
            Step::Later(429, 5),
            Step::Later(429, 5),
            Step::Later(429, 5),
        ]],
        &[],
        &[],
    );
    let start = tokio::time::Instant::now();
    let error = call(&rig.router, None).await.unwrap_err();
    assert!(matches!(error, ProviderError::Status { status: 429, .. }));
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(calls(&rig.a[0]).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_bad_request_does_not_fall_back() {
    let rig = rig(&[&[Step::Status(400)]], &[], &["b/m2"]);
    let error = call(&rig.router, None).await.unwrap_err();
    assert!(matches!(error, ProviderError::Status { status: 400, .. }));
    assert!(calls(&rig.b).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_model_that_answered_is_never_replaced() {
    let rig = rig(&[&[Step::Breaks("half")]], &[], &["b/m2"]);
    let (answered, text) = call(&rig.router, None).await.unwrap();
    assert_eq!(answered.model, "m1");
    assert_eq!(text, "half<the model stream broke: cut>");
    assert!(calls(&rig.b).is_empty());
}

#[tokio::test(start_paused = true)]
async fn when_everything_fails_the_last_error_comes_back() {
    let rig = rig(&[&[Step::Status(401)]], &[Step::Status(404)], &["b/m2"]);
    let error = call(&rig.router, None).await.unwrap_err();
    assert!(matches!(error, ProviderError::Status { status: 404, .. }));
    // Both rest now; a call still tries them in order rather than failing unasked.
    let (answered, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(answered.provider, "a");
    assert_eq!(calls(&rig.a[0]).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_sessions_choice_goes_first_and_names_resolve() {
    let rig = rig(&[&[]], &[], &["b/m2", "a/m1"]);
    let (answered, _) = call(&rig.router, Some("b/other")).await.unwrap();
    assert_eq!(
        (answered.provider.as_str(), answered.model.as_str()),
        ("b", "other")
    );
    let (answered, _) = call(&rig.router, Some("bare")).await.unwrap();
    assert_eq!(
        (answered.provider.as_str(), answered.model.as_str()),
        ("a", "bare")
    );
    assert_eq!(rig.router.chain(None).len(), 2, "a/m1 is not tried twice");
    assert_eq!(rig.router.resolve("b/x"), ("b".into(), "x".into()));
    assert_eq!(rig.router.resolve("c/x"), ("a".into(), "c/x".into()));
    assert_eq!(rig.router.unusable("b/x"), None);
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_is_waited_out_when_no_other_model_is_ready() {
    // No fallback at all: the 30 s are waited, as before fallbacks existed.
    let rig_alone = rig(&[&[Step::Later(429, 30)]], &[], &[]);
    let start = tokio::time::Instant::now();
    let (answered, _) = call(&rig_alone.router, None).await.unwrap();
    assert_eq!(answered.model, "m1");
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    // The fallback rests: waiting for the first model beats giving up at once.
    let rig = rig_with_resting_b(&[Step::Later(429, 30)]).await;
    let start = tokio::time::Instant::now();
    let (answered, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(answered.model, "m1");
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

/// A rig whose fallback `b/m2` rests (it failed with a 404 on a call of its own).
async fn rig_with_resting_b(a: &[Step]) -> Rig {
    let rig = rig(&[a], &[Step::Status(404)], &["b/m2"]);
    call(&rig.router, Some("b/m2")).await.unwrap_err();
    assert!(
        rig.router
            .route_lines(None)
            .iter()
            .any(|l| l.starts_with("b/m2 rests"))
    );
    rig
}

#[tokio::test(start_paused = true)]
async fn resting_models_are_the_last_resort_when_the_ready_ones_fail() {
    let rig = rig_with_resting_b(&[Step::Status(500), Step::Status(500), Step::Status(500)]).await;
    let (answered, _) = call(&rig.router, None).await.unwrap();
    assert_eq!(answered.model, "m2");
    assert_eq!(answered.skipped, ["a/m1: server error (500)"]);
}

#[tokio::test(start_paused = true)]
async fn status_lines_name_only_what_the_sessions_calls_would_try() {
    let rig = rig(&[&[]], &[Step::Status(404)], &[]);
    call(&rig.router, Some("b/other")).await.unwrap_err();
    assert!(rig.router.route_lines(None).is_empty());
    let lines = rig.router.route_lines(Some("b/other"));
    assert_eq!(lines, ["b/other rests 30 s more: model not found (404)"]);
}
