//! Text to speech through an OpenAI-compatible endpoint (`[tts] url`): `POST
//! <url>/audio/speech` with `{model, voice, input, response_format: "opus"}` and the bearer
//! key, answered with the audio, OGG/Opus bytes. The answer is bounded in size and time.

use std::time::Duration;

use crate::config::TtsConfig;

/// The largest answer read, in bytes.
pub const MAX_AUDIO_BYTES: usize = 20 << 20;
/// How long one synthesis may take, from the request to the last byte.
pub const SPEECH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an error answer's body is kept in the error.
const ERROR_EXCERPT: usize = 200;

/// Why no audio came back.
#[derive(Debug, thiserror::Error)]
pub enum SpeechError {
    /// The HTTP client could not be built.
    #[error("cannot build the speech client: {0}")]
    Client(String),
    /// The request failed on the way (connection, timeout, a broken answer).
    #[error("the speech endpoint cannot be reached: {0}")]
    Http(String),
    /// The endpoint answered with an error status.
    #[error("the speech endpoint answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// The audio is bigger than [`MAX_AUDIO_BYTES`].
    #[error("the speech endpoint answered more than {MAX_AUDIO_BYTES} bytes")]
    TooBig,
    /// The answer has no audio.
    #[error("the speech endpoint answered no audio")]
    Empty,
    /// The answer is not an OGG stream (a proxy's page, another format).
    #[error("the speech endpoint answered something that is not OGG/Opus audio")]
    NotAudio,
}

/// The first bytes of every OGG stream.
const OGG_MAGIC: &[u8] = b"OggS";

/// The most bytes of an error answer read (for its excerpt).
const ERROR_BYTES: usize = 4096;

/// A speech endpoint, with its model and voice (its `Debug` leaves the key out).
#[derive(Clone)]
pub struct Speech {
    client: reqwest::Client,
    url: String,
    api_key: String,
    model: String,
    voice: String,
}

impl std::fmt::Debug for Speech {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Speech")
            .field("url", &crate::config::redact::redact_url(&self.url, false))
            .field("model", &self.model)
            .field("voice", &self.voice)
            .finish_non_exhaustive()
    }
}

impl Speech {
    /// The endpoint of `config`; `None` when voice replies are off (no URL).
    pub fn new(config: &TtsConfig) -> Result<Option<Speech>, SpeechError> {
        if !config.enabled() {
            return Ok(None);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(SPEECH_TIMEOUT)
            .build()
            .map_err(|e| SpeechError::Client(e.without_url().to_string()))?;
        Ok(Some(Speech {
            client,
            url: format!("{}/audio/speech", config.url.trim().trim_end_matches('/')),
            api_key: config.api_key.trim().to_owned(),
            model: config.model.trim().to_owned(),
            voice: config.voice.trim().to_owned(),
        }))
    }

    /// `text` spoken: OGG/Opus bytes.
    pub async fn synthesize(&self, text: &str) -> Result<Vec<u8>, SpeechError> {
        let body = serde_json::json!({
            "model": self.model,
            "voice": self.voice,
            "input": text,
            "response_format": "opus",
        });
        let mut request = self.client.post(&self.url).json(&body);
        if !self.api_key.is_empty() {
            request = request.bearer_auth(&self.api_key);
        }
        let response = request.send().await.map_err(http)?;
        let status = response.status();
        if !status.is_success() {
            let bytes = read_start(response, ERROR_BYTES).await;
            let text = String::from_utf8_lossy(&bytes);
            return Err(SpeechError::Status {
                status: status.as_u16(),
                body: text.trim().chars().take(ERROR_EXCERPT).collect(),
            });
        }
        let audio = read_capped(response, MAX_AUDIO_BYTES).await?;
        if audio.is_empty() {
            return Err(SpeechError::Empty);
        }
        // A voice note that is not audio would stand in for the answer (mode `instead`).
        if !audio.starts_with(OGG_MAGIC) {
            return Err(SpeechError::NotAudio);
        }
        Ok(audio)
    }
}

/// The answer's body, refused past `max` bytes.
async fn read_capped(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, SpeechError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(SpeechError::TooBig);
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(http)? {
        if bytes.len() + chunk.len() > max {
            return Err(SpeechError::TooBig);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The first `max` bytes of the answer's body (what arrived before an error).
async fn read_start(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                bytes.extend_from_slice(&chunk[..chunk.len().min(max - bytes.len())])
            }
            _ => break,
        }
    }
    bytes
}

fn http(e: reqwest::Error) -> SpeechError {
    SpeechError::Http(e.without_url().to_string())
}
