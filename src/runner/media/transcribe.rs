//! Voice notes and audio to text through an OpenAI-compatible `/audio/transcriptions`
//! endpoint (`[media] transcribe_url`): a multipart POST of the file and the model name,
//! answered with `{"text": ...}`.

use std::path::Path;

use super::fetch::{FetchError, client};
use crate::config::MediaConfig;

/// The text of the audio `bytes` of file `file` (of type `mime`), or why not.
pub async fn transcribe(
    config: &MediaConfig,
    bytes: Vec<u8>,
    file: &str,
    mime: &str,
) -> Result<String, FetchError> {
    let name = Path::new(file)
        .file_name()
        .map(|n| n.to_string_lossy().replace('"', "_"))
        .unwrap_or_else(|| "audio".to_owned());
    let boundary = format!("chela-{}", uuid::Uuid::new_v4().simple());
    let mut body = Vec::with_capacity(bytes.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{}\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: {mime}\r\n\r\n",
            config.transcribe_model
        )
        .as_bytes(),
    );
    body.extend_from_slice(&bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let url = format!(
        "{}/audio/transcriptions",
        config.transcribe_url.trim().trim_end_matches('/')
    );
    let mut request = client()?
        .post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body);
    let key = config.transcribe_api_key.trim();
    if !key.is_empty() {
        request = request.bearer_auth(key);
    }
    let http = |e: reqwest::Error| FetchError::Http(e.without_url().to_string());
    let answer: serde_json::Value = request
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(http)?
        .json()
        .await
        .map_err(http)?;
    match answer["text"].as_str().map(str::trim) {
        Some(text) if !text.is_empty() => Ok(text.to_owned()),
        _ => Err(FetchError::Http("the transcription has no text".to_owned())),
    }
}
