//! `[media]`: files that come with chat messages (docs/media.md), and `[model] vision`.

use serde::{Deserialize, Serialize};

/// `[media]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// Largest file downloaded from a chat, in MiB; a bigger one is refused with a short
    /// reply and the message goes on with a note.
    pub max_mb: u64,
    /// Base URL of an OpenAI-compatible speech-to-text API (`https://api.openai.com/v1`):
    /// voice notes and audio files are sent to `<url>/audio/transcriptions` and the model gets
    /// the text. Empty: off (the model gets the file's path).
    pub transcribe_url: String,
    /// The transcription model.
    pub transcribe_model: String,
    /// Bearer token for the transcription API; empty: none sent.
    pub transcribe_api_key: String,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_mb: 20,
            transcribe_url: String::new(),
            transcribe_model: "whisper-1".to_owned(),
            transcribe_api_key: String::new(),
        }
    }
}

impl MediaConfig {
    /// The limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_mb.saturating_mul(1024 * 1024)
    }

    /// Checks the table: `Err((key, message))` names the key at fault.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.max_mb == 0 {
            return Err(("media.max_mb".to_owned(), "must be more than 0".to_owned()));
        }
        let url = self.transcribe_url.trim();
        if !url.is_empty() && !url.starts_with("http://") && !url.starts_with("https://") {
            return Err((
                "media.transcribe_url".to_owned(),
                format!("{url:?} must start with http:// or https://"),
            ));
        }
        Ok(())
    }
}

/// `[model] vision`: whether pictures go to the model as images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vision {
    /// On for the model names known to take images (GPT-4o and later, Claude 3 and later,
    /// Gemini, the `-vl`/`vision`/`llava`/`pixtral` open models), off for others.
    #[default]
    Auto,
    /// Always send images.
    On,
    /// Never send images: the model gets a note with the file's path.
    Off,
}

/// Model name parts of the known vision models (matched in the lowercased name).
const VISION_MODELS: &[&str] = &[
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-4-vision",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "claude",
    "gemini",
    "vision",
    "-vl",
    "llava",
    "pixtral",
    "gemma-3",
    "llama-4",
    "grok-2-vision",
];

impl Vision {
    /// Whether `model` (the model name a call uses) gets images.
    pub fn accepts(self, model: &str) -> bool {
        match self {
            Vision::On => true,
            Vision::Off => false,
            Vision::Auto => {
                let model = model.to_ascii_lowercase();
                let name = model.rsplit('/').next().unwrap_or(&model);
                VISION_MODELS.iter().any(|part| name.contains(part))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_knows_the_vision_models() {
        for model in [
            "gpt-4.1-mini",
            "gpt-4o",
            "claude-sonnet-4-5",
            "openai/gpt-5",
            "qwen2.5-vl-7b",
        ] {
            assert!(Vision::Auto.accepts(model), "{model}");
        }
        for model in [
            "gpt-3.5-turbo",
            "llama-3.1-8b",
            "mistral-small",
            "test-model",
        ] {
            assert!(!Vision::Auto.accepts(model), "{model}");
        }
        assert!(Vision::On.accepts("test-model"));
        assert!(!Vision::Off.accepts("gpt-4o"));
    }

    #[test]
    fn max_mb_must_be_positive() {
        assert_eq!(MediaConfig::default().max_bytes(), 20 * 1024 * 1024);
        let zero = MediaConfig {
            max_mb: 0,
            ..MediaConfig::default()
        };
        assert!(zero.check().is_err());
        let ftp = MediaConfig {
            transcribe_url: "ftp://x".into(),
            ..MediaConfig::default()
        };
        assert_eq!(ftp.check().unwrap_err().0, "media.transcribe_url");
    }
}
