//! The gateway's side of the intake stage's port ([`IntakePort`]): the facts routing needs,
//! the questions waiting in a chat, the commands, and answers in the chat.

use std::sync::Arc;

use chela_channel::{BoxFuture, Conversation, Inbound, InboundSink, Press};

use super::Core;
use crate::acp::permission::Decision;
use crate::inbound::commands::Command;
use crate::inbound::route::{RouteFacts, commands_allowed};
use crate::intake::IntakePort;
use crate::questions::press::AfterPress;

impl IntakePort for Core {
    fn answer_question(&self, key: &str, decision: Decision) -> bool {
        self.desk.permissions().answer_oldest(key, decision)
    }

    fn is_bound(&self, key: &str) -> bool {
        self.acp.binding(key).is_some()
    }

    fn answer<'a>(&'a self, inbound: &'a Inbound, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.notices.answer(inbound, text))
    }

    fn say<'a>(&'a self, to: &'a Conversation, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.notices.say(to, text))
    }

    fn press(self: Arc<Self>, press: Press) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            // The rule of `/approve`: `commands.allow_from`, then owners only.
            let (to, who) = (&press.conversation, &press.sender.id);
            let allowed = commands_allowed(self.command_allow_from(), to, who);
            let owner = allowed && self.is_owner(&to.channel, who);
            match self.desk.press(&press, owner).await {
                Some(AfterPress::Paired(paired)) => super::pairing::welcome(&self, paired).await,
                Some(AfterPress::Command(command)) => {
                    // The presser's own typed command: the rules of typing it apply.
                    let router = crate::intake::Router::new(self.intake.clone());
                    if let Err(e) = router.accept(*command).await {
                        tracing::warn!(error = %e, "cannot take in a menu's choice");
                    }
                }
                None => {}
            }
        })
    }

    fn pairing_asked(
        self: Arc<Self>,
        inbound: Inbound,
        code: String,
        new: bool,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { super::pairing::asked(&self, inbound, code, new) })
    }

    fn run_command(
        self: Arc<Self>,
        key: String,
        inbound: Inbound,
        command: Command,
    ) -> BoxFuture<'static, Option<Inbound>> {
        Box::pin(async move {
            let commands = self.commands();
            crate::commands::handle(&commands, &key, &inbound, command).await
        })
    }
}

impl RouteFacts for Core {
    fn question_waiting(&self, key: &str) -> bool {
        self.desk.permissions().is_waiting(key)
    }

    fn is_owner(&self, channel: &str, sender_id: &str) -> bool {
        crate::intake::is_owner(&self.config, &self.store, channel, sender_id)
    }

    fn binding_owner(&self, key: &str) -> Option<String> {
        self.acp.binding(key).map(|b| b.owner)
    }

    fn is_skill(&self, key: &str, name: &str) -> bool {
        let skills = &self.agents.for_key(key).skill_names;
        skills.iter().any(|skill| skill.eq_ignore_ascii_case(name))
    }

    fn others_choose_models(&self) -> bool {
        let config = &self.config;
        config.commands.model.open_to_others(&config.model.models)
    }

    fn command_allow_from(&self) -> &[String] {
        &self.config.commands.allow_from
    }

    fn is_group_admin<'a>(
        &'a self,
        conv: &'a Conversation,
        sender_id: &'a str,
    ) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match self.notices.channel(&conv.channel) {
                Some(channel) => channel.is_admin(conv, sender_id).await.unwrap_or(false),
                None => false,
            }
        })
    }
}
