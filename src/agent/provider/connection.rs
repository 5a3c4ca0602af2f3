//! What the HTTP providers share about where their calls go: [`Connection`] (the client, the
//! URLs, the headers with the key, the settings) and the bearer headers of the OpenAI wire
//! formats.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::Value;

use super::settings::ProviderSettings;
use super::transport::{Decoder, Endpoint, http_client, stream_call};
use super::{EventStream, ProviderError, ProviderRequest};

/// One provider's way to its server.
pub(crate) struct Connection {
    /// The HTTP client.
    pub client: reqwest::Client,
    /// Base URL, without a trailing slash.
    pub base_url: String,
    /// Full URL of a model call.
    pub url: String,
    /// Headers of every call, the key's included.
    pub headers: HeaderMap,
    /// The model asked for when a request names none.
    pub model: String,
    /// Timeouts, retries and the default token cap.
    pub settings: ProviderSettings,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection for `settings` calling `path` below the base URL with `headers` (to which
    /// the settings' extra headers are added).
    pub fn new(
        settings: ProviderSettings,
        path: &str,
        mut headers: HeaderMap,
    ) -> Result<Connection, ProviderError> {
        settings.add_headers(&mut headers)?;
        let base_url = settings.effective_base_url();
        Ok(Connection {
            client: http_client()?,
            url: format!("{base_url}{path}"),
            base_url,
            headers,
            model: settings.effective_model(),
            settings,
        })
    }

    /// The token cap of `request` (the settings' when it sets 0).
    pub fn max_tokens(&self, request: &ProviderRequest) -> u32 {
        match request.max_tokens {
            0 => self.settings.max_tokens,
            n => n,
        }
    }

    /// The token cap of `request` with room for its reasoning, which an OpenAI model counts
    /// in its output ([`super::thinking_budget`] on top), on OpenAI's own API; other servers
    /// keep the cap as it is (vLLM refuses a cap past the context, DeepSeek one past 8,192).
    pub fn max_tokens_thinking(&self, request: &ProviderRequest) -> u32 {
        let room = match self.settings.is_official_endpoint() {
            true => super::thinking_budget(request.thinking).unwrap_or(0),
            false => 0,
        };
        self.max_tokens(request).saturating_add(room)
    }

    /// The model of `request` (the connection's when it names none).
    pub fn model_of<'a>(&'a self, request: &'a ProviderRequest) -> &'a str {
        request.model.as_deref().unwrap_or(&self.model)
    }

    /// Adds the request's `prompt_cache_key` to `body` on OpenAI's own API (its automatic
    /// cache routes calls with one key to one cache; other servers may refuse the field).
    pub fn add_cache_key(&self, body: &mut Value, request: &ProviderRequest) {
        if let Some(key) = &request.cache_key
            && self.settings.is_official_endpoint()
        {
            body["prompt_cache_key"] = Value::String(key.clone());
        }
    }

    /// POSTs `body` to the call URL and decodes the answer with `decoder`.
    pub async fn stream<D: Decoder, B: serde::Serialize + Sync>(
        &self,
        body: &B,
        decoder: D,
    ) -> Result<EventStream, ProviderError> {
        let endpoint = Endpoint {
            client: &self.client,
            url: &self.url,
            base_url: &self.base_url,
            headers: &self.headers,
            idle_timeout: self.settings.idle_timeout,
            max_retries: self.settings.max_retries,
        };
        stream_call(endpoint, body, decoder).await
    }

    /// The model ids the server lists at `url`.
    pub async fn list(&self, url: &str) -> Result<Vec<String>, ProviderError> {
        super::models::list(super::models::Listing {
            client: &self.client,
            url,
            base_url: &self.base_url,
            headers: &self.headers,
        })
        .await
    }
}

/// `Authorization: Bearer KEY` for `settings` (no header without a key).
pub(crate) fn bearer(settings: &ProviderSettings) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = settings.effective_api_key() {
        let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
            ProviderError::NotConfigured(
                "the API key contains characters not allowed in an HTTP header".to_string(),
            )
        })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}
