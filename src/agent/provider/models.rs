//! The models a provider's server lists (`GET {base}/models` for OpenAI-compatible servers,
//! Ollama and llama.cpp included; `GET {base}/v1/models` for Anthropic), for `/model`'s
//! menu. Both answer `{"data": [{"id": ...}, ...]}`; the ids come in the server's order.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::ProviderError;
use super::transport::{connect_error, error_response};

/// Longest wait for a server's list: a menu is not worth holding a command for longer.
const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// Ids kept of a list at most (a menu shows fewer).
const MAX_LISTED: usize = 200;
/// Characters of an id kept (longer ones are left out: no typed `/model` would hold them).
const MAX_ID_CHARS: usize = 100;
/// Bytes of a list read at most (OpenAI's own list is about 30 KB).
const MAX_BODY: usize = 1 << 20;

/// Where to ask and how.
pub(crate) struct Listing<'a> {
    /// The HTTP client.
    pub client: &'a reqwest::Client,
    /// Full URL of the list.
    pub url: &'a str,
    /// Base URL, named in connect errors.
    pub base_url: &'a str,
    /// Headers, auth included.
    pub headers: &'a HeaderMap,
}

/// The ids the server at `listing` lists, within [`LIST_TIMEOUT`] in all.
pub(crate) async fn list(listing: Listing<'_>) -> Result<Vec<String>, ProviderError> {
    tokio::time::timeout(LIST_TIMEOUT, fetch(listing))
        .await
        .map_err(|_| ProviderError::IdleTimeout(LIST_TIMEOUT.as_secs()))?
}

async fn fetch(listing: Listing<'_>) -> Result<Vec<String>, ProviderError> {
    let mut response = listing
        .client
        .get(listing.url)
        .headers(listing.headers.clone())
        .send()
        .await
        .map_err(|e| connect_error(listing.base_url, &e))?;
    if !response.status().is_success() {
        return Err(error_response(response, LIST_TIMEOUT).await);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ProviderError::Stream(e.to_string()))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(ProviderError::Stream(format!(
                "the model list is over {MAX_BODY} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let json: Value = serde_json::from_slice(&body)
        .map_err(|e| ProviderError::Stream(format!("the model list is not JSON: {e}")))?;
    Ok(ids_of(&json))
}

/// The ids of a `{"data": [{"id": ...}]}` list: printable, without spaces, each once, and
/// none that `/model` reads as going back to the default (`default`, `reset`).
fn ids_of(json: &Value) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let listed = json["data"].as_array().into_iter().flatten();
    for id in listed.filter_map(|m| m["id"].as_str()) {
        let usable = !id.is_empty()
            && !id.eq_ignore_ascii_case("default")
            && !id.eq_ignore_ascii_case("reset")
            && id.chars().count() <= MAX_ID_CHARS
            && !id.chars().any(|c| c.is_control() || c.is_whitespace());
        if usable && !ids.iter().any(|i| i == id) {
            ids.push(id.to_owned());
        }
        if ids.len() == MAX_LISTED {
            break;
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_in_order_once_and_odd_ones_left_out() {
        let json = serde_json::json!({"data": [
            {"id": "gpt-4.1"}, {"id": "llama3:8b"}, {"id": "gpt-4.1"}, {"id": "two words"},
            {"id": ""}, {"name": "no id"}, {"id": "x".repeat(101)}, {"id": "bad\nline"},
            {"id": "Default"}, {"id": "reset"}, {"id": "claude-sonnet-4-5"}
        ]});
        assert_eq!(ids_of(&json), ["gpt-4.1", "llama3:8b", "claude-sonnet-4-5"]);
        assert!(ids_of(&serde_json::json!({"error": "x"})).is_empty());
    }

    /// Both wire formats' lists, read from the kit's fake model server (which lists one
    /// model), and an unreachable server named in the error.
    #[tokio::test]
    async fn openai_and_anthropic_providers_read_the_servers_list() {
        use crate::agent::provider::{Provider, ProviderKind, ProviderSettings};
        let fake = chela_testkit::model::FakeModel::start().await.unwrap();
        let mut openai = ProviderSettings::new(ProviderKind::OpenAi);
        openai.base_url = Some(fake.openai_base_url());
        let openai = crate::agent::provider::openai::OpenAiProvider::new(&openai).unwrap();
        assert_eq!(openai.models().await.unwrap(), ["fake-model"]);
        let mut anthropic = ProviderSettings::new(ProviderKind::Anthropic);
        anthropic.base_url = Some(fake.base_url());
        let anthropic =
            crate::agent::provider::anthropic::AnthropicProvider::new(&anthropic).unwrap();
        assert_eq!(anthropic.models().await.unwrap(), ["fake-model"]);

        let mut gone = ProviderSettings::new(ProviderKind::OpenAi);
        gone.base_url = Some("http://127.0.0.1:9/v1".into());
        let gone = crate::agent::provider::openai::OpenAiProvider::new(&gone).unwrap();
        let error = gone.models().await.unwrap_err().to_string();
        assert!(error.contains("127.0.0.1:9"), "{error}");
    }
}
