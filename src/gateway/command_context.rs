//! The commands' port ([`CommandContext`]) over the gateway's core: [`CoreCommands`] is the
//! one place that maps what a command may use onto the core.

use std::path::Path;
use std::sync::Arc;

use chela_channel::{BoxFuture, Channel, Conversation, Inbound};

use super::Core;
use crate::acp::AcpManager;
use crate::agent::provider::Provider;
use crate::cluster::Stopped;
use crate::commands::{CommandContext, Compactor};
use crate::config::QueueLimits;
use crate::lane::Lanes;
use crate::runner::stop::Stopper;
use crate::store::Store;

/// [`CommandContext`] over the gateway's core.
pub(super) struct CoreCommands(pub(super) Arc<Core>);

impl CommandContext for CoreCommands {
    fn lanes(&self) -> &Lanes {
        &self.0.lanes
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    fn acp(&self) -> &AcpManager {
        &self.0.acp
    }

    fn provider(&self, key: &str) -> &Arc<dyn Provider> {
        &self.0.agents.for_key(key).provider
    }

    fn pricing(&self, key: &str) -> &crate::agent::pricing::Pricing {
        &self.0.agents.for_key(key).pricing
    }

    fn context_window(&self, key: &str) -> u64 {
        self.0.agents.for_key(key).compaction.context_window
    }

    fn thinking(&self, key: &str) -> crate::config::Thinking {
        self.0.agents.for_key(key).thinking
    }

    fn tts(&self) -> &crate::config::TtsConfig {
        &self.0.config.tts
    }

    fn allowed_models(&self) -> &[String] {
        &self.0.config.model.models
    }

    fn queue_limits(&self) -> QueueLimits {
        self.0.config.queue.limits()
    }

    fn workspace(&self, key: &str) -> &Path {
        &self.0.agents.for_key(key).tool_context.workspace
    }

    fn session_key(&self, inbound: &Inbound) -> String {
        crate::intake::session_key_of(&self.0.config, inbound)
    }

    fn channel(&self, name: &str) -> Option<Arc<dyn Channel>> {
        self.0.notices.channel(name)
    }

    fn answer<'a>(&'a self, inbound: &'a Inbound, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.0.notices.answer(inbound, text))
    }

    fn say<'a>(&'a self, to: &'a Conversation, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.0.notices.say(to, text))
    }

    fn may_choose_models(&self, inbound: &Inbound) -> bool {
        crate::inbound::route::may_choose_models(
            &inbound.conversation,
            &inbound.sender.id,
            &*self.0,
        )
    }

    fn offers_menus(&self, inbound: &Inbound) -> bool {
        // A native command's answer is private: no menu under it. Menus are shown in
        // direct chats alone, where the one who asked is the only one who can press, and on
        // channels that show buttons.
        inbound.interaction.is_none()
            && inbound.conversation.kind == chela_channel::ChatKind::Direct
            && self
                .0
                .notices
                .channel(&inbound.conversation.channel)
                .is_some_and(|c| c.has_buttons())
    }

    fn offer<'a>(
        &'a self,
        inbound: &'a Inbound,
        text: &'a str,
        choices: &'a [(String, String)],
    ) -> BoxFuture<'a, ()> {
        if choices.is_empty() || !self.offers_menus(inbound) {
            return self.answer(inbound, text);
        }
        Box::pin(
            self.0
                .desk
                .offer_choices(&inbound.conversation, text, choices),
        )
    }

    fn stop<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Stopped> {
        Box::pin(async move {
            let core = &self.0;
            Stopper::new(&core.store, &core.lanes, &*core.placement)
                .stop(key, true)
                .await
        })
    }

    fn approve<'a>(&'a self, to: &'a Conversation, args: &'a str) -> BoxFuture<'a, String> {
        Box::pin(crate::questions::approvals::command(&self.0.desk, to, args))
    }

    fn compactor(&self, key: String) -> Compactor {
        let core = self.0.clone();
        Box::new(move |cancel| {
            Box::pin(async move {
                let agent = core.agents.for_key(&key);
                agent.flush_before_command_compaction(&key, &cancel).await;
                agent.compact(&key, 0, &cancel).await
            })
        })
    }
}
