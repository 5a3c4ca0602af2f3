//! `[tts]`: voice replies (docs/voice.md). A session with voice replies on (`/tts on`, or
//! `default = "on"`) gets its final answers spoken through an OpenAI-compatible speech
//! endpoint (`<url>/audio/speech`) and sent as a voice note, beside the text or instead of it.

use serde::{Deserialize, Serialize};

/// `[tts]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TtsConfig {
    /// Base URL of an OpenAI-compatible text-to-speech API (`https://api.openai.com/v1`):
    /// finals are spoken by `POST <url>/audio/speech`. Empty: voice replies are off.
    pub url: String,
    /// Bearer token for the speech API (e.g. `"${OPENAI_API_KEY}"`); empty: none sent.
    pub api_key: String,
    /// The speech model.
    pub model: String,
    /// The voice it speaks with.
    pub voice: String,
    /// Whether the voice note goes beside the text or instead of it.
    pub mode: TtsMode,
    /// The longest final spoken, in characters of its spoken text; a longer one stays text
    /// only.
    pub max_chars: usize,
    /// Whether sessions that never said `/tts on|off` get voice replies.
    pub default: TtsDefault,
}

impl Default for TtsConfig {
    fn default() -> Self {
        TtsConfig {
            url: String::new(),
            api_key: String::new(),
            model: "gpt-4o-mini-tts".to_owned(),
            voice: "alloy".to_owned(),
            mode: TtsMode::Beside,
            max_chars: 4000,
            default: TtsDefault::Off,
        }
    }
}

/// `[tts] mode`: where the voice note goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TtsMode {
    /// After the text.
    #[default]
    Beside,
    /// Instead of the text (the text still goes when the voice note cannot).
    Instead,
}

/// `[tts] default`: voice replies of the sessions that did not choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TtsDefault {
    /// Text only until `/tts on`.
    #[default]
    Off,
    /// Voice replies until `/tts off`.
    On,
}

impl TtsConfig {
    /// Whether voice replies are set up (a URL is given).
    pub fn enabled(&self) -> bool {
        !self.url.trim().is_empty()
    }

    /// Checks the table (its URL is checked with the other URLs): `Err((key, message))` names
    /// the key at fault.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.max_chars == 0 {
            return Err(("tts.max_chars".to_owned(), "must be at least 1".to_owned()));
        }
        if !self.enabled() {
            return Ok(());
        }
        if self.model.trim().is_empty() {
            return Err((
                "tts.model".to_owned(),
                "must name a speech model, e.g. \"gpt-4o-mini-tts\"".to_owned(),
            ));
        }
        if self.voice.trim().is_empty() {
            return Err((
                "tts.voice".to_owned(),
                "must name a voice, e.g. \"alloy\"".to_owned(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_the_key_at_fault() {
        let mut tts = TtsConfig::default();
        assert!(!tts.enabled());
        assert_eq!(tts.check(), Ok(()));
        tts.model = String::new();
        assert_eq!(tts.check(), Ok(()), "off: the model does not matter");
        tts.url = "https://api.openai.com/v1".into();
        assert!(tts.enabled());
        assert_eq!(tts.check().unwrap_err().0, "tts.model");
        tts.model = "tts-1".into();
        tts.voice = " ".into();
        assert_eq!(tts.check().unwrap_err().0, "tts.voice");
        tts.voice = "nova".into();
        tts.max_chars = 0;
        assert_eq!(tts.check().unwrap_err().0, "tts.max_chars");
    }

    #[test]
    fn mode_and_default_parse_by_name() {
        let tts: TtsConfig =
            toml::from_str("url = \"http://127.0.0.1:9/v1\"\nmode = \"instead\"\ndefault = \"on\"")
                .unwrap();
        assert_eq!(tts.mode, TtsMode::Instead);
        assert_eq!(tts.default, TtsDefault::On);
        assert!(toml::from_str::<TtsConfig>("mode = \"loud\"").is_err());
    }
}
