//! Reading the server's answers: its status, headers and body (within a limit).

use reqwest::header::{self, HeaderMap};
use reqwest::{Response, StatusCode};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
};

/// What the client's methods return on failure.
pub(super) type HttpError = StreamableHttpError<reqwest::Error>;

/// The media types a server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// One JSON-RPC message.
    Json,
    /// Server-sent events.
    EventStream,
}

/// A 401 or 403 with a `WWW-Authenticate` challenge as rmcp's authorization errors.
pub(super) fn check_challenge(response: &Response) -> Result<(), HttpError> {
    let status = response.status();
    if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return Ok(());
    }
    let Some(challenge) = response.headers().get(header::WWW_AUTHENTICATE) else {
        return Ok(());
    };
    let challenge = challenge.to_str().map_err(|_| {
        StreamableHttpError::UnexpectedServerResponse("invalid www-authenticate header".into())
    })?;
    if status == StatusCode::UNAUTHORIZED {
        return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            challenge.to_owned(),
        )));
    }
    let scope = required_scope(challenge);
    Err(StreamableHttpError::InsufficientScope(
        InsufficientScopeError::new(challenge.to_owned(), scope),
    ))
}

/// The `scope=` parameter of a challenge, quoted or not.
fn required_scope(challenge: &str) -> Option<String> {
    const KEY: &str = "scope=";
    // ASCII lowercasing keeps every byte offset.
    let start = challenge.to_ascii_lowercase().find(KEY)? + KEY.len();
    let rest = challenge.get(start..)?;
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.find('"').map(|end| quoted[..end].to_owned()),
        None => rest
            .split([',', ';', ' ', '\t'])
            .next()
            .filter(|scope| !scope.is_empty())
            .map(str::to_owned),
    }
}

/// rmcp's metadata of a 429 or 5xx answer: the status and a short `Retry-After`.
pub(super) fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|value| std::str::from_utf8(value.as_bytes()).ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// The session id the server gives in its answer.
pub(super) fn session_id(response: &Response) -> Option<String> {
    let value = response.headers().get(HEADER_SESSION_ID)?;
    value.to_str().ok().map(str::to_owned)
}

/// JSON or an event stream by the `Content-Type`'s media type (any case, parameters
/// ignored); `None` for anything else or none.
pub(super) fn body_kind(headers: &HeaderMap) -> Option<Body> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media_type = value.split(';').next().unwrap_or_default().trim();
    if media_type.eq_ignore_ascii_case(JSON_MIME_TYPE) {
        Some(Body::Json)
    } else if media_type.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE) {
        Some(Body::EventStream)
    } else {
        None
    }
}

/// The `Content-Type` as text, for errors.
pub(super) fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// The whole body, refused once it is longer than `max_size` bytes (by its declared length
/// before reading, by the bytes received while reading).
pub(super) async fn read_bounded(
    mut response: Response,
    max_size: usize,
) -> Result<Vec<u8>, HttpError> {
    let limit = u64::try_from(max_size).unwrap_or(u64::MAX);
    if response
        .content_length()
        .is_some_and(|length| length > limit)
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| StreamableHttpError::Client(e.without_url()))?
    {
        if chunk.len() > max_size - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `max_size` bytes of `bytes` as text, for messages.
pub(super) fn lossy(bytes: &[u8], max_size: usize) -> String {
    let shown = bytes.get(..max_size).unwrap_or(bytes);
    String::from_utf8_lossy(shown).into_owned()
}
