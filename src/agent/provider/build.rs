//! Building the provider a [`ProviderSettings`] describes.

use std::sync::Arc;

use super::anthropic::AnthropicProvider;
use super::echo::EchoProvider;
use super::openai::OpenAiProvider;
use super::responses::ResponsesProvider;
use super::settings::{
    ANTHROPIC_NOT_CONFIGURED, OPENAI_NOT_CONFIGURED, ProviderKind, ProviderSettings,
};
use super::{Provider, ProviderError};

/// Builds the provider `settings` describe.
///
/// Fails with [`ProviderError::NotConfigured`] (saying what to set) when the vendor's own API
/// is targeted without a key. Any other base URL works without a key (no auth header is sent).
pub fn build(settings: &ProviderSettings) -> Result<Arc<dyn Provider>, ProviderError> {
    let missing_key = settings.effective_api_key().is_none() && settings.is_official_endpoint();
    match settings.kind {
        ProviderKind::Echo => Ok(Arc::new(EchoProvider::new())),
        ProviderKind::OpenAi | ProviderKind::Responses if missing_key => Err(
            ProviderError::NotConfigured(OPENAI_NOT_CONFIGURED.to_string()),
        ),
        ProviderKind::Anthropic if missing_key => Err(ProviderError::NotConfigured(
            ANTHROPIC_NOT_CONFIGURED.to_string(),
        )),
        ProviderKind::OpenAi => Ok(Arc::new(OpenAiProvider::new(settings)?)),
        ProviderKind::Responses => Ok(Arc::new(ResponsesProvider::new(settings)?)),
        ProviderKind::Anthropic => Ok(Arc::new(AnthropicProvider::new(settings)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::settings::OPENAI_DEFAULT_MODEL;
    use super::super::tests_support::env_of;
    use super::*;

    #[test]
    fn openai_without_key_against_the_official_api_says_what_to_set() {
        let s = ProviderSettings::new(ProviderKind::OpenAi).resolve_env(env_of(&[]));
        match build(&s) {
            Err(ProviderError::NotConfigured(msg)) => assert_eq!(msg, OPENAI_NOT_CONFIGURED),
            Err(other) => panic!("unexpected error {other}"),
            Ok(_) => panic!("built without a key"),
        }
    }

    #[test]
    fn anthropic_without_key_is_not_configured() {
        let s = ProviderSettings::new(ProviderKind::Anthropic);
        assert!(matches!(build(&s), Err(ProviderError::NotConfigured(_))));
    }

    #[test]
    fn local_base_url_needs_no_key() -> Result<(), ProviderError> {
        let env = env_of(&[("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1/")]);
        let s = ProviderSettings::new(ProviderKind::OpenAi).resolve_env(env);
        assert_eq!(s.effective_base_url(), "http://127.0.0.1:11434/v1");
        let provider = build(&s)?;
        assert_eq!(provider.name(), "openai");
        assert_eq!(provider.model(), OPENAI_DEFAULT_MODEL);
        Ok(())
    }

    #[test]
    fn echo_is_built_without_anything() -> Result<(), ProviderError> {
        let provider = build(&ProviderSettings::new(ProviderKind::Echo))?;
        assert_eq!((provider.name(), provider.model()), ("echo", "echo"));
        Ok(())
    }
}
