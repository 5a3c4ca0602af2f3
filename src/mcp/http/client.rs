//! The `StreamableHttpClient` methods of [`ReqwestClient`]: POST a JSON-RPC message (the
//! answer is JSON, an event stream or nothing), GET the server's event stream, DELETE the
//! session. Bodies are read within rmcp's `StreamableHttpResponseLimits`.

use std::collections::HashMap;
use std::sync::Arc;

use reqwest::header::{self, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::common::http_header::{HEADER_LAST_EVENT_ID, HEADER_SESSION_ID};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use self::response::{
    Body, body_kind, check_challenge, content_type, lossy, read_bounded, session_id, status_error,
};
use super::{ReqwestClient, sse};

mod refusal;
mod response;

use response::HttpError;

/// The `Accept` of a POST: the answer may be one JSON message or an event stream.
pub(super) const POST_ACCEPT: &str = "application/json, text/event-stream";

/// The `Accept` of the GET that opens the server's event stream.
const GET_ACCEPT: &str = "text/event-stream, application/json";

/// Bytes of an unreadable answer shown in the error.
const PREVIEW_LEN: usize = 256;

/// Headers rmcp passes that only the client itself may set (lowercase).
const CLIENT_HEADERS: &[&str] = &["accept", "mcp-session-id", "last-event-id"];

/// What every request of one call carries.
struct Call {
    uri: Arc<str>,
    session_id: Option<Arc<str>>,
    /// A bearer token (chela passes `Authorization` among the custom headers instead).
    bearer: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
}

impl Call {
    fn new(
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Call {
        Call {
            uri,
            session_id,
            bearer,
            custom_headers,
        }
    }
}

impl StreamableHttpClient for ReqwestClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let call = Call::new(uri, session_id, bearer, custom_headers);
        post(
            &self.0,
            call,
            message,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        let call = Call::new(uri, session_id, bearer, custom_headers);
        post(&self.0, call, message, limits).await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let call = Call::new(uri, session_id, bearer, custom_headers);
        post(&self.0, call, message, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let call = Call::new(uri, Some(session_id), bearer, custom_headers);
        let response = send(request(&self.0, Method::DELETE, call)?).await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            tracing::debug!("the MCP server does not end sessions on request");
            return Ok(());
        }
        response
            .error_for_status()
            .map_err(|e| StreamableHttpError::Client(e.without_url()))?;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, HttpError> {
        let call = Call::new(uri, session_id, bearer, custom_headers);
        let max_event_size = StreamableHttpResponseLimits::default().max_sse_event_size;
        open_stream(&self.0, call, last_event_id, max_event_size).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        bearer: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, HttpError> {
        let call = Call::new(uri, session_id, bearer, custom_headers);
        open_stream(&self.0, call, last_event_id, max_sse_event_size).await
    }
}

/// POSTs `message`: 202 or 204 is accepted, 404 with a session is an expired session, any
/// other failure goes to [`refusal::answer`], a success to [`success`].
async fn post(
    client: &reqwest::Client,
    call: Call,
    message: ClientJsonRpcMessage,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let with_session = call.session_id.is_some();
    let builder = request(client, Method::POST, call)?
        .header(header::ACCEPT, POST_ACCEPT)
        .json(&message);
    let response = send(builder).await?;
    check_challenge(&response)?;
    let status = response.status();
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && with_session {
        return Err(StreamableHttpError::SessionExpired);
    }
    if !status.is_success() {
        return refusal::answer(response, &message, with_session, limits).await;
    }
    success(response, &message, limits).await
}

/// The answer of a successful POST: an event stream, one JSON message, or (when `message`
/// awaits no reply) nothing whatever the body.
async fn success(
    response: Response,
    message: &ClientJsonRpcMessage,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let session_id = session_id(&response);
    let no_reply_due = awaits_no_reply(message);
    if no_reply_due && response.content_length() == Some(0) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    match body_kind(response.headers()) {
        Some(Body::EventStream) => {
            let events = sse::events(response.bytes_stream(), limits.max_sse_event_size);
            Ok(StreamableHttpPostResponse::Sse(events, session_id))
        }
        Some(Body::Json) => {
            let body = read_bounded(response, limits.max_json_response_size).await?;
            match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, session_id)),
                Err(e) if no_reply_due => {
                    tracing::debug!("ignoring an unreadable answer to a notification: {e}");
                    Ok(StreamableHttpPostResponse::Accepted)
                }
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(
                    format!(
                        "the answer is not a JSON-RPC message ({e}): {}",
                        lossy(&body, PREVIEW_LEN)
                    )
                    .into(),
                )),
            }
        }
        None if no_reply_due => Ok(StreamableHttpPostResponse::Accepted),
        None => Err(StreamableHttpError::UnexpectedContentType(content_type(
            response.headers(),
        ))),
    }
}

/// GETs the server's event stream: 405 means the server offers none.
async fn open_stream(
    client: &reqwest::Client,
    call: Call,
    last_event_id: Option<String>,
    max_event_size: usize,
) -> Result<BoxedSseResponse, HttpError> {
    let mut builder = request(client, Method::GET, call)?.header(header::ACCEPT, GET_ACCEPT);
    if let Some(id) = last_event_id {
        builder = builder.header(HEADER_LAST_EVENT_ID, id);
    }
    let response = send(builder).await?;
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        return Err(StreamableHttpError::ServerDoesNotSupportSse);
    }
    check_challenge(&response)?;
    if let Some(error) = status_error(response.status(), response.headers()) {
        return Err(error.into());
    }
    let response = response
        .error_for_status()
        .map_err(|e| StreamableHttpError::Client(e.without_url()))?;
    if body_kind(response.headers()).is_none() {
        return Err(StreamableHttpError::UnexpectedContentType(content_type(
            response.headers(),
        )));
    }
    Ok(sse::events(response.bytes_stream(), max_event_size))
}

/// A request to the call's URI with its session, bearer token and custom headers.
fn request(
    client: &reqwest::Client,
    method: Method,
    call: Call,
) -> Result<RequestBuilder, HttpError> {
    let mut builder = client.request(method, call.uri.as_ref());
    if let Some(token) = call.bearer {
        builder = builder.bearer_auth(token);
    }
    if let Some(session_id) = call.session_id {
        builder = builder.header(HEADER_SESSION_ID, session_id.as_ref());
    }
    for (name, value) in call.custom_headers {
        if CLIENT_HEADERS.contains(&name.as_str()) {
            return Err(StreamableHttpError::ReservedHeaderConflict(
                name.to_string(),
            ));
        }
        builder = builder.header(name, value);
    }
    Ok(builder)
}

/// Sends `builder`, a transport failure becoming rmcp's client error.
async fn send(builder: RequestBuilder) -> Result<Response, HttpError> {
    builder
        .send()
        .await
        .map_err(|e| StreamableHttpError::Client(e.without_url()))
}

/// Whether `message` leaves no request waiting for the server's answer.
fn awaits_no_reply(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Notification(_)
            | ClientJsonRpcMessage::Response(_)
            | ClientJsonRpcMessage::Error(_)
    )
}
