//! Named providers, fallbacks, key rotation and rests (docs/models.md): [`ModelRouter`] is
//! the [`Provider`] an agent calls. It tries the session's model or the agent's, then each
//! fallback in order, when a call fails for a reason another model could fix
//! ([`failure::Failure::falls_back`]); a rate-limited or refused key hands over to the
//! provider's next key first; what failed rests a while ([`health`]) and is skipped while
//! something else is ready.
//!
//! A fallback happens only before the call's first event: a model that answered a word is
//! never replaced, so nothing the chat saw is shown twice. The stream it returns starts with
//! [`ProviderEvent::Answered`], naming the model that answers and what was skipped.
//!
//! - `catalog`: the providers by name, each with one built provider per key.
//! - `health`: what rests, until when.
//! - `failure`: how a failure is classified and named.
//! - `attempt`: one model's call with its retries and key rotation.

mod attempt;
pub mod catalog;
pub mod failure;
pub mod health;

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::time::Instant;

use super::{
    Answered, BoxFuture, EventStream, Provider, ProviderError, ProviderEvent, ProviderRequest,
};
use catalog::Catalog;
use failure::{Failure, describe};
use health::Subject;

/// A model of a provider, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The provider's name.
    pub provider: String,
    /// The model.
    pub model: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// An agent's models: its own and its fallbacks, over the gateway's [`Catalog`].
pub struct ModelRouter {
    catalog: Arc<Catalog>,
    primary: Target,
    fallbacks: Vec<Target>,
    /// Retries of a retryable failure of one model before the next is tried.
    max_retries: u32,
    /// Models named in the config: metric labels; others are `other`.
    named: Vec<String>,
}

impl ModelRouter {
    /// The router for model `model` (empty: the `[model]` provider's default) with
    /// `fallbacks`; fails when one of them names a provider that could not be set up.
    pub fn new(
        catalog: Arc<Catalog>,
        main: &str,
        model: &str,
        fallbacks: &[String],
        max_retries: u32,
    ) -> Result<ModelRouter, ProviderError> {
        let primary = match model.trim() {
            "" => target(main, "", &catalog)?,
            named => {
                let (provider, model) = catalog.resolve(named, main);
                target(&provider, &model, &catalog)?
            }
        };
        let fallbacks = fallbacks
            .iter()
            .map(|name| {
                let (provider, model) = catalog.resolve(name, &primary.provider);
                target(&provider, &model, &catalog)
                    .map_err(|e| ProviderError::NotConfigured(format!("the fallback {name}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let named = std::iter::once(&primary)
            .chain(&fallbacks)
            .map(|t| t.model.clone())
            .collect();
        Ok(ModelRouter {
            catalog,
            primary,
            fallbacks,
            max_retries,
            named,
        })
    }

    /// The agent's model and then its fallbacks.
    pub fn targets(&self) -> Vec<Target> {
        self.chain(None)
    }

    /// The models a call for `choice` (a session's `/model`, or none) tries, in order, each
    /// once.
    fn chain(&self, choice: Option<&str>) -> Vec<Target> {
        let first = match choice {
            Some(name) => {
                let (provider, model) = self.catalog.resolve(name, &self.primary.provider);
                Target { provider, model }
            }
            None => self.primary.clone(),
        };
        let mut chain = vec![first];
        for fallback in &self.fallbacks {
            if !chain.contains(fallback) {
                chain.push(fallback.clone());
            }
        }
        chain
    }

    /// Whether `target` may be tried at `now`: it does not rest and a key of its provider
    /// does not either.
    fn ready(&self, target: &Target, now: Instant) -> bool {
        let health = &self.catalog.health;
        let Some(named) = self.catalog.get(&target.provider) else {
            return false;
        };
        named.has_ready_key(health, now) && health.resting(&subject(target), now).is_none()
    }

    /// The metric label of `model`.
    fn label<'a>(&self, model: &'a str) -> &'a str {
        if self.named.iter().any(|m| m == model) {
            model
        } else {
            "other"
        }
    }

    /// Notes that `target` was skipped because of `why` (label `reason`).
    fn skipped(&self, target: &Target, reason: &str, why: &str, skips: &mut Vec<String>) {
        crate::metrics::global().model_skipped(&target.provider, self.label(&target.model), reason);
        skips.push(format!("{target}: {why}"));
    }

    /// The call: the models that do not rest, in order, then, when they all failed, the
    /// resting ones as a last resort (when every model rests, that is all of them, in order).
    async fn call(&self, request: ProviderRequest) -> Result<EventStream, ProviderError> {
        let chain = self.chain(request.model.as_deref());
        let now = Instant::now();
        let (ready, resting): (Vec<&Target>, Vec<&Target>) =
            chain.iter().partition(|t| self.ready(t, now));
        let mut skips = Vec::new();
        let mut last = None;
        let passes = [ready, resting.clone()];
        for (pass, targets) in passes.iter().enumerate() {
            for (i, target) in targets.iter().enumerate() {
                let later = i + 1 < targets.len();
                match self.try_target(target, &request, later).await {
                    Ok(stream) => {
                        if pass == 0 {
                            // Skipped for their rest: named first, in the chain's order.
                            let mut rested = Vec::new();
                            for target in &resting {
                                self.skipped(
                                    target,
                                    "resting",
                                    "resting after failing",
                                    &mut rested,
                                );
                            }
                            rested.append(&mut skips);
                            skips = rested;
                        }
                        return Ok(self.answered(target, skips, stream));
                    }
                    Err(error) if !Failure::of(&error).falls_back() => return Err(error),
                    Err(error) => {
                        let why = describe(Failure::of(&error), &error);
                        tracing::warn!(model = %target, error = %error, "model call failed; trying the next model");
                        self.skipped(target, Failure::of(&error).label(), &why, &mut skips);
                        last = Some(error);
                    }
                }
            }
        }
        Err(last.unwrap_or_else(|| ProviderError::NotConfigured("no model to call".into())))
    }

    /// One model's call (its retries and keys), `later` when another model may follow.
    async fn try_target(
        &self,
        target: &Target,
        request: &ProviderRequest,
        later: bool,
    ) -> Result<EventStream, ProviderError> {
        let Some(named) = self.catalog.get(&target.provider) else {
            let why = self
                .catalog
                .unbuilt(&target.provider)
                .unwrap_or("unknown provider");
            return Err(ProviderError::NotConfigured(format!(
                "{}: {why}",
                target.provider
            )));
        };
        let attempt = attempt::Attempt {
            named,
            target,
            health: &self.catalog.health,
            max_retries: self.max_retries,
            later,
        };
        attempt.run(request).await
    }

    /// `stream` behind an [`ProviderEvent::Answered`] naming `target` and `skips`.
    fn answered(&self, target: &Target, skips: Vec<String>, stream: EventStream) -> EventStream {
        crate::metrics::global().model_answered(&target.provider, self.label(&target.model));
        if !skips.is_empty() {
            tracing::info!(model = %target, skipped = %skips.join("; "), "a fallback model answers");
        }
        let answered = ProviderEvent::Answered(Answered {
            provider: target.provider.clone(),
            model: target.model.clone(),
            skipped: skips,
        });
        Box::pin(futures_util::stream::once(async move { Ok(answered) }).chain(stream))
    }
}

/// `target` as what rests.
fn subject(target: &Target) -> Subject {
    Subject::Model {
        provider: target.provider.clone(),
        model: target.model.clone(),
    }
}

/// Model `model` of provider `provider` (empty: its default), if the provider was set up.
fn target(provider: &str, model: &str, catalog: &Catalog) -> Result<Target, ProviderError> {
    let Some(named) = catalog.get(provider) else {
        let why = catalog.unbuilt(provider).unwrap_or("no such provider");
        return Err(ProviderError::NotConfigured(why.to_owned()));
    };
    let model = match model {
        "" => named.default_model.clone(),
        model => model.to_owned(),
    };
    Ok(Target {
        provider: provider.to_owned(),
        model,
    })
}

impl Provider for ModelRouter {
    fn name(&self) -> &str {
        &self.primary.provider
    }

    fn model(&self) -> &str {
        &self.primary.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        Box::pin(self.call(request))
    }

    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        match self.catalog.get(&self.primary.provider) {
            Some(named) => named.first().models(),
            None => Box::pin(async { Ok(Vec::new()) }),
        }
    }

    fn resolve(&self, model: &str) -> (String, String) {
        self.catalog.resolve(model, &self.primary.provider)
    }

    fn unusable(&self, model: &str) -> Option<String> {
        let (provider, _) = self.resolve(model);
        let why = self.catalog.unbuilt(&provider)?;
        Some(format!("the provider {provider} is not set up: {why}"))
    }

    fn route_lines(&self, choice: Option<&str>) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.fallbacks.is_empty() {
            let names: Vec<String> = self.fallbacks.iter().map(Target::to_string).collect();
            lines.push(format!("Fallbacks: {}", names.join(", ")));
        }
        // Only what this session's calls would try: its models and their providers' keys.
        let chain = self.chain(choice);
        let mut subjects: Vec<Subject> = chain.iter().map(subject).collect();
        for target in &chain {
            if let Some(named) = self.catalog.get(&target.provider) {
                subjects.extend(named.keys());
            }
        }
        lines.extend(self.catalog.health.lines(&subjects, Instant::now()));
        lines
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
