//! Turning an [`Answer`] into a server-sent-event response, one wire format at a time.
//!
//! A producer task writes events into a bounded channel that backs the response body; it
//! sleeps for `slow` answers, parks for `stall`, and stops as soon as the client goes away or
//! the server shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::script::{Answer, ToolCall};

/// Token counts reported in usage blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Request body characters / 4 (the cached ones included).
    pub(crate) input: u64,
    /// Answer characters / 4.
    pub(crate) output: u64,
    /// Of `input`, read from the simulated prompt cache.
    pub(crate) cache_read: u64,
    /// Of `input`, written to it (Anthropic).
    pub(crate) cache_write: u64,
}

impl Usage {
    /// Input plus output.
    pub(crate) fn total(self) -> u64 {
        self.input + self.output
    }

    /// The input neither read from nor written to the cache (Anthropic's `input_tokens`).
    pub(crate) fn uncached(self) -> u64 {
        self.input
            .saturating_sub(self.cache_read + self.cache_write)
    }
}

/// Facts about the request every wire format needs to shape its answer.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// 1-based number of the request among every POST the server saw.
    pub(crate) request: usize,
    /// The request's `model`, or `fake-model`.
    pub(crate) model: String,
    /// Token usage of this exchange.
    pub(crate) usage: Usage,
    /// Unix seconds at the time of the request.
    pub(crate) created: u64,
}

/// One wire format's event shapes. Called in order: `start`, `text_delta`*, `text_done` (only
/// if there was text), `tool_call`*, `finish`.
pub(crate) trait Wire: Send + 'static {
    /// Events opening the response.
    fn start(&mut self) -> Vec<Event>;
    /// One piece of reasoning (before the text); none by default.
    fn reasoning_delta(&mut self, text: &str) -> Vec<Event> {
        let _ = text;
        Vec::new()
    }
    /// The reasoning is complete; nothing by default.
    fn reasoning_done(&mut self) -> Vec<Event> {
        Vec::new()
    }
    /// One piece of answer text.
    fn text_delta(&mut self, text: &str) -> Vec<Event>;
    /// The answer text is complete.
    fn text_done(&mut self) -> Vec<Event>;
    /// One whole tool call.
    fn tool_call(&mut self, call: &ToolCall) -> Vec<Event>;
    /// Events closing the response (stop reason, usage).
    fn finish(&mut self) -> Vec<Event>;
}

/// An SSE event carrying `data` as JSON, named `name` when given.
pub(crate) fn event(name: Option<&str>, data: &Value) -> Event {
    // The name goes first: some clients read `event:` before `data:` line by line.
    let event = match name {
        Some(name) => Event::default().event(name),
        None => Event::default(),
    };
    event.data(data.to_string())
}

/// Splits tool-call arguments into about three pieces so clients must join them.
pub(crate) fn argument_pieces(arguments: &str) -> Vec<String> {
    let size = arguments.chars().count().div_ceil(3).max(1);
    super::script::chunk(arguments, size)
}

/// The streaming response for `answer` in the format `wire`.
pub(crate) fn sse(wire: impl Wire, answer: Answer, shutdown: watch::Receiver<bool>) -> Response {
    let (tx, rx) = mpsc::channel::<Event>(16);
    tokio::spawn(async move {
        // Err means the client left or the server is stopping: nothing more to do.
        let _ = produce(wire, answer, &tx, shutdown).await;
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), rx))
    });
    Sse::new(body).into_response()
}

/// The client is gone or the server is stopping.
struct Gone;

async fn produce(
    mut wire: impl Wire,
    answer: Answer,
    tx: &mpsc::Sender<Event>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Gone> {
    send(tx, wire.start()).await?;
    for piece in &answer.reasoning {
        send(tx, wire.reasoning_delta(piece)).await?;
    }
    if !answer.reasoning.is_empty() {
        send(tx, wire.reasoning_done()).await?;
    }
    for chunk in &answer.chunks {
        if !answer.delay.is_zero() {
            pause(answer.delay, tx, &mut shutdown).await?;
        }
        send(tx, wire.text_delta(chunk)).await?;
    }
    if answer.stall {
        tokio::select! {
            _ = tx.closed() => {}
            _ = shutdown.wait_for(|stop| *stop) => {}
        }
        return Err(Gone);
    }
    if !answer.chunks.is_empty() {
        send(tx, wire.text_done()).await?;
    }
    for call in &answer.tool_calls {
        send(tx, wire.tool_call(call)).await?;
    }
    send(tx, wire.finish()).await
}

async fn send(tx: &mpsc::Sender<Event>, events: Vec<Event>) -> Result<(), Gone> {
    for event in events {
        tx.send(event).await.map_err(|_| Gone)?;
    }
    Ok(())
}

async fn pause(
    delay: Duration,
    tx: &mpsc::Sender<Event>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<(), Gone> {
    tokio::select! {
        () = tokio::time::sleep(delay) => Ok(()),
        () = tx.closed() => Err(Gone),
        _ = shutdown.wait_for(|stop| *stop) => Err(Gone),
    }
}

/// For non-streaming answers: waits as long as the stream would have taken. A stalled answer
/// waits until the server stops (or the client leaves and the request is dropped); returns
/// false then.
pub(crate) async fn settle(answer: &Answer, mut shutdown: watch::Receiver<bool>) -> bool {
    let steps = u32::try_from(answer.chunks.len()).unwrap_or(u32::MAX);
    let delay = answer.delay.saturating_mul(steps);
    if answer.stall {
        let _ = shutdown.wait_for(|stop| *stop).await;
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep(delay) => true,
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}
