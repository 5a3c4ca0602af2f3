//! Answers as `text/event-stream`, the way the TypeScript SDK does: a priming event (an id,
//! empty data), then the answer as a `message` event, then the end of the stream.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};

use super::handler::Reply;
use super::http_state::HttpShared;

/// A 200 event stream that carries `work`'s answer once it is ready (nothing if cancelled).
pub(crate) fn answer(
    shared: &HttpShared,
    work: impl Future<Output = Reply> + Send + 'static,
) -> Response {
    let priming = format!("id: {}\ndata: \n\n", next_id(shared));
    let message_id = next_id(shared);
    let message = async move {
        match work.await {
            Reply::Answer(answer) => {
                format!("event: message\nid: {message_id}\ndata: {answer}\n\n")
            }
            Reply::Silent | Reply::Crash => String::new(),
        }
    };
    let events = stream::iter([priming])
        .chain(stream::once(message))
        .filter(|event| std::future::ready(!event.is_empty()))
        .map(Ok::<_, Infallible>);
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, Body::from_stream(events)).into_response()
}

fn next_id(shared: &HttpShared) -> u64 {
    shared.event_ids.fetch_add(1, Ordering::SeqCst) + 1
}
