//! A POST the server refused (a status other than 2xx; 202, 204 and an expired session are
//! handled before): a JSON-RPC error in the body is the answer, anything else an error with
//! the status and the start of the body.

use reqwest::{Response, StatusCode};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};

use super::response::{Body, HttpError, body_kind, lossy, read_bounded, session_id, status_error};

/// Stands in for a body that could not be read.
const UNREADABLE: &str = "<the body could not be read>";

/// The outcome of POSTing `message` (with a session or not) when the server answered
/// `response`, a status other than 2xx.
///
/// A 429, or a 5xx without JSON, is an error from the status alone; a JSON body is read
/// within the JSON limit and is the answer when it is a JSON-RPC error; any other body only
/// up to the diagnostic limit.
pub(super) async fn answer(
    response: Response,
    message: &ClientJsonRpcMessage,
    with_session: bool,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let status = response.status();
    let session_id = session_id(&response);
    let is_json = body_kind(response.headers()) == Some(Body::Json);
    let overloaded = match status_error(status, response.headers()) {
        Some(error) if !is_json || status == StatusCode::TOO_MANY_REQUESTS => {
            return Err(error.into());
        }
        other => other,
    };
    let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    let discover_id = discover_id(message, with_session, status);
    let text = if is_json && !auth_failure {
        let body = match read_bounded(response, limits.max_json_response_size).await {
            Ok(body) => body,
            Err(e @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                return Err(overloaded.map_or(e, StreamableHttpError::from));
            }
            Err(_) => UNREADABLE.as_bytes().to_vec(),
        };
        if let Ok(ServerJsonRpcMessage::Error(error)) = serde_json::from_slice(&body) {
            return Ok(match discover_id {
                Some(id) => rejected_discovery(error.error, id),
                None => {
                    StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), session_id)
                }
            });
        }
        lossy(&body, limits.max_error_response_size)
    } else {
        prefix(response, limits.max_error_response_size).await
    };
    if let Some(id) = discover_id {
        let why = format!("server/discover rejected with HTTP {status}: {text}");
        return Ok(rejected_discovery(
            ErrorData::invalid_request(why, None),
            id,
        ));
    }
    match overloaded {
        Some(error) => Err(error.into()),
        None => Err(StreamableHttpError::UnexpectedServerResponse(
            format!("HTTP {status}: {text}").into(),
        )),
    }
}

/// The id of `message` when it is a `server/discover` the server rejected as a server of
/// the initialize handshake would (a 4xx other than 401 and 403, before any session): rmcp
/// then falls back to `initialize`.
fn discover_id(
    message: &ClientJsonRpcMessage,
    with_session: bool,
    status: StatusCode,
) -> Option<RequestId> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let rejected = !with_session
        && status.is_client_error()
        && !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
        && matches!(request.request, ClientRequest::DiscoverRequest(_));
    rejected.then(|| request.id.clone())
}

/// The answer to the `server/discover` of `id`: `error`, under the request's id (a proxy's
/// error cannot carry it).
fn rejected_discovery(error: ErrorData, id: RequestId) -> StreamableHttpPostResponse {
    StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, Some(id)), None)
}

/// The body's first `max_size` bytes as text, the rest left unread.
async fn prefix(mut response: Response, max_size: usize) -> String {
    let mut body = Vec::new();
    while body.len() < max_size {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let take = chunk.len().min(max_size - body.len());
                body.extend_from_slice(&chunk[..take]);
            }
            Ok(None) => break,
            Err(_) => return lossy(UNREADABLE.as_bytes(), max_size),
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}
