//! Routing of normalized inbound messages, as a decision: [`route`] says what a message is
//! (the answer to a waiting question, a command for the fast path, a refused command, or a
//! turn for the session's lane) from the facts the gateway gives it ([`RouteFacts`]); the
//! intake stage carries the decision out (`src/intake`).

use chela_channel::{BoxFuture, ChatKind, Conversation, Inbound};

use crate::acp::permission::Decision;
use crate::inbound::commands::{self, Command};
use crate::lane::QueuedTurn;
use crate::store::PendingTurn;

/// The sender id of messages chela itself puts into a session (a sub-agent's task or
/// result, a spawned thread's first message); they have no platform message to quote.
pub const SYSTEM_SENDER: &str = "chela";

/// How the message ids of turns chela schedules itself begin (`cron:<job>:<due ms>`).
pub const SCHEDULED_ID_PREFIX: &str = "cron:";

/// Whether `inbound` is a turn chela scheduled itself (a cron job or the heartbeat): from
/// [`SYSTEM_SENDER`], with a [`SCHEDULED_ID_PREFIX`] id. No platform message has both.
pub fn is_scheduled(inbound: &Inbound) -> bool {
    inbound.sender.id == SYSTEM_SENDER && inbound.message_id.starts_with(SCHEDULED_ID_PREFIX)
}

/// The channel name of messages sent through the RPC (they are not limited by
/// `commands.allow_from`, as the local terminal is not).
pub const RPC_CHANNEL: &str = "rpc";

/// The sender id of messages sent through the RPC with the client token.
pub const RPC_CLIENT_SENDER: &str = "rpc";

/// The sender id of messages sent through the RPC with the operator token (it acts for an
/// owner; the client token never does).
pub const RPC_OPERATOR_SENDER: &str = "operator";

/// The channel name of the local terminal (`chela chat`, `chela agent`): its user runs the
/// gateway, and counts as an owner.
pub const TERMINAL_CHANNEL: &str = "terminal";

/// What the router needs to know about the gateway's state to decide.
pub trait RouteFacts: Sync {
    /// Whether session `key` has a permission question waiting for an answer.
    fn question_waiting(&self, key: &str) -> bool;
    /// Whether `sender_id` on `channel` is an owner.
    fn is_owner(&self, channel: &str, sender_id: &str) -> bool;
    /// The owner (`channel:sender`) of the coding-agent binding of session `key`, if bound.
    fn binding_owner(&self, key: &str) -> Option<String>;
    /// `commands.allow_from`: when not empty, the only senders whose commands count.
    fn command_allow_from(&self) -> &[String];
    /// Whether a loaded skill is called `name` (`/NAME` then goes to the model).
    fn is_skill(&self, key: &str, name: &str) -> bool;
    /// Whether senders who are not owners may switch models (`[commands] model`).
    fn others_choose_models(&self) -> bool;
    /// Whether `sender_id` administers the group `conv` (asked of the platform).
    fn is_group_admin<'a>(
        &'a self,
        conv: &'a Conversation,
        sender_id: &'a str,
    ) -> BoxFuture<'a, bool>;
}

/// Why a sender may not run a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `commands.allow_from` is set and does not list the sender.
    NotInAllowFrom,
    /// The command is for owners only.
    OwnerOnly,
    /// In a group, the command is for owners and the group's admins.
    AdminOnly,
    /// `/model NAME`: switching models is for owners (`[commands] model`).
    ModelOwnerOnly,
    /// `/think LEVEL`: more reasoning costs more; for those who may switch models.
    ThinkOwnerOnly,
}

impl Refusal {
    /// What to tell the sender (`who` is `channel:sender_id`): why, and which setting
    /// changes it.
    pub fn explain(self, command: &str, who: &str) -> String {
        match self {
            Refusal::NotInAllowFrom => format!(
                "Commands from {who} are not taken here: the operator's [commands] allow_from does not list you."
            ),
            Refusal::OwnerOnly => format!(
                "{command} is for the bot's owners. The operator can make {who} one in [commands] owner_allow_from."
            ),
            Refusal::AdminOnly => {
                format!("{command} in a group needs an owner or an admin of this group.")
            }
            Refusal::ModelOwnerOnly => format!(
                "Switching models is for the bot's owners. The operator can make {who} one in [commands] owner_allow_from, or let others choose the models of [model] models."
            ),
            Refusal::ThinkOwnerOnly => format!(
                "Turning the model's reasoning up is for those who may switch models. The operator can make {who} an owner in [commands] owner_allow_from, or open [commands] model to others."
            ),
        }
    }
}

/// What a message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The answer to the session's waiting permission question.
    Answer(Decision),
    /// A command its sender may run: answered on the fast path, never by the model.
    Command(Command),
    /// A command its sender may not run. A native one (`native`) must be refused privately,
    /// or the platform shows it as unanswered; a typed one is told why in a direct chat and
    /// ignored in a group.
    Refused {
        /// The command came as a platform interaction.
        native: bool,
        /// Why.
        why: Refusal,
    },
    /// A native command the core does not handle: never a turn for the model.
    Unsupported(String),
    /// A typed `/name` that is no command and no skill: answered, never a turn, so that a
    /// typo of `/stop` cannot steer a run.
    Unknown(String),
    /// An ordinary message: a turn for the session's lane.
    Turn,
}

/// Decides what `inbound`, addressed to session `key`, is.
pub async fn route(key: &str, inbound: &Inbound, facts: &dyn RouteFacts) -> Route {
    if let Some(decision) = question_answer(key, inbound, facts) {
        return Route::Answer(decision);
    }
    if let Some(command) = commands::parse(&inbound.text, None) {
        match refusal(inbound, &command, facts).await {
            None => return Route::Command(command),
            Some(why) if inbound.text.trim_start().starts_with('/') => {
                let native = inbound.interaction.is_some();
                return Route::Refused { native, why };
            }
            // A plain stop word its sender may not use is an ordinary message.
            Some(_) => {}
        }
    }
    if inbound.interaction.is_some() {
        let name = inbound.text.split_whitespace().next().unwrap_or("/");
        return Route::Unsupported(name.to_owned());
    }
    // In a conversation bound to a coding agent, `/name` may be the agent's own command.
    match commands::unknown_name(&inbound.text) {
        Some(name) if !facts.is_skill(key, &name) && facts.binding_owner(key).is_none() => {
            Route::Unknown(name)
        }
        _ => Route::Turn,
    }
}

/// Reads a reply to a permission question: `allow`/`yes`/`y`/`ok` or `deny`/`no`/`n`.
pub fn parse_answer(text: &str) -> Option<Decision> {
    let word = text
        .trim()
        .trim_matches(|c: char| c.is_ascii_punctuation())
        .to_lowercase();
    match word.as_str() {
        "allow" | "yes" | "y" | "ok" | "approve" => Some(Decision::Allow),
        "deny" | "no" | "n" | "reject" => Some(Decision::Deny),
        _ => None,
    }
}

/// The answer `inbound` gives to an open permission question of session `key`, when it is
/// one (`allow` / `deny` from an owner or the binding's owner).
fn question_answer(key: &str, inbound: &Inbound, facts: &dyn RouteFacts) -> Option<Decision> {
    if !facts.question_waiting(key) {
        return None;
    }
    let decision = parse_answer(&inbound.text)?;
    let conv = &inbound.conversation;
    let who = format!("{}:{}", conv.channel, inbound.sender.id);
    let allowed = conv.channel == "terminal"
        || facts.is_owner(&conv.channel, &inbound.sender.id)
        || facts.binding_owner(key).is_some_and(|owner| owner == who);
    allowed.then_some(decision)
}

/// Why `command` may not run for this sender, or `None` when it may: `commands.allow_from`
/// first, then the owner and group-admin rules of the commands that need them.
async fn refusal(inbound: &Inbound, command: &Command, facts: &dyn RouteFacts) -> Option<Refusal> {
    let conv = &inbound.conversation;
    let sender = &inbound.sender.id;
    if !commands_allowed(facts.command_allow_from(), conv, sender) {
        return Some(Refusal::NotInAllowFrom);
    }
    if matches!(
        command,
        Command::Acp(_) | Command::Session(_) | Command::Approve(_)
    ) {
        // Coding agents and approved commands run code: owners only (the local terminal
        // user is one).
        let owner = conv.channel == "terminal" || facts.is_owner(&conv.channel, sender);
        return (!owner).then_some(Refusal::OwnerOnly);
    }
    if let Command::Model(args) = command
        && !may_switch_model(args, conv, sender, facts)
    {
        return Some(Refusal::ModelOwnerOnly);
    }
    if let Command::Think(args) = command
        && !may_turn_thinking_up(args, conv, sender, facts)
    {
        return Some(Refusal::ThinkOwnerOnly);
    }
    let admin_only = match command {
        Command::New(_) | Command::Reset { .. } | Command::Stop => true,
        // Seeing the model is for everyone; changing a group's model is not.
        Command::Model(args)
        | Command::Think(args)
        | Command::Reasoning(args)
        | Command::Tts(args) => !args.trim().is_empty(),
        _ => false,
    };
    if !admin_only || conv.kind == ChatKind::Direct || facts.is_owner(&conv.channel, sender) {
        return None;
    }
    let admin = facts.is_group_admin(conv, sender).await;
    (!admin).then_some(Refusal::AdminOnly)
}

/// Whether `/model ARGS` from `sender` may go on: showing the model and going back to the
/// default are for everyone; switching to a name is for owners (the terminal user is one),
/// and for others only as `[commands] model` allows (issue #32.8: a non-owner picked any
/// model on the operator's bill).
fn may_switch_model(args: &str, conv: &Conversation, sender: &str, facts: &dyn RouteFacts) -> bool {
    let name = args.trim();
    name.is_empty()
        || name.eq_ignore_ascii_case("default")
        || name.eq_ignore_ascii_case("reset")
        || may_choose_models(conv, sender, facts)
}

/// Whether `/think ARGS` from `sender` may go on: showing the level, `off` and going back to
/// the default are for everyone; a level above `off` follows `/model NAME`'s rule (it costs).
fn may_turn_thinking_up(
    args: &str,
    conv: &Conversation,
    sender: &str,
    facts: &dyn RouteFacts,
) -> bool {
    let level = args.trim();
    ["", "off", "default", "reset"]
        .iter()
        .any(|free| level.eq_ignore_ascii_case(free))
        || may_choose_models(conv, sender, facts)
}

/// Whether `sender` in `conv` may switch to a model by name (`/model NAME`): the local
/// terminal, owners, and everyone when `[commands] model` opens it to others.
pub fn may_choose_models(conv: &Conversation, sender: &str, facts: &dyn RouteFacts) -> bool {
    conv.channel == "terminal"
        || facts.is_owner(&conv.channel, sender)
        || facts.others_choose_models()
}

/// `commands.allow_from`, when set, is the only source of commands (SPEC 2); the local
/// terminal and the RPC are not limited by it.
/// Whether `commands.allow_from` (`allow`) lets `sender_id` in `conv` run commands.
pub fn commands_allowed(allow: &[String], conv: &Conversation, sender_id: &str) -> bool {
    allow.is_empty()
        || conv.channel == "terminal"
        || conv.channel == RPC_CHANNEL
        || allow
            .iter()
            .any(|a| a == "*" || *a == format!("{}:{sender_id}", conv.channel))
}

/// What became of an accepted message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Queued durably for a run, under this pending seq (on several nodes: queued for the
    /// node running the session to route, whatever it is).
    Queued(u64),
    /// Handled without a run: a command on the fast path, an answer to a waiting question,
    /// or an unknown command answered.
    Command,
    /// Dropped: a duplicate, or a command its sender may not run.
    Ignored,
}

/// The lane turn for a durable pending entry.
pub fn queued_turn(seq: u64, pending: &PendingTurn) -> QueuedTurn {
    let inbound = &pending.inbound;
    let conv = &inbound.conversation;
    let scheduled = is_scheduled(inbound);
    QueuedTurn {
        scheduled,
        seqs: vec![seq],
        files: inbound
            .attachments
            .iter()
            .map(|a| (seq, a.clone()))
            .collect(),
        text: inbound.text.clone(),
        sender: if inbound.sender.name.is_empty() {
            inbound.sender.id.clone()
        } else {
            inbound.sender.name.clone()
        },
        // Collect merges only within one reply target (and, once admission has roles, one
        // authorization level); a scheduled turn never merges.
        context: if scheduled {
            format!("scheduled|{}", inbound.message_id)
        } else {
            format!(
                "{}|{}|{}|{}",
                conv.channel,
                conv.account,
                conv.chat_id,
                conv.thread_id.as_deref().unwrap_or("")
            )
        },
        // In groups the reply quotes the message it answers (chela's own have none).
        quote: (conv.kind != ChatKind::Direct && inbound.sender.id != SYSTEM_SENDER)
            .then(|| inbound.message_id.clone()),
        target: conv.clone(),
        queued_ms: pending.queued_ms,
    }
}

#[cfg(test)]
mod scheduled_tests {
    use super::*;

    fn inbound(sender_id: &str, message_id: &str) -> Inbound {
        Inbound {
            conversation: Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: ChatKind::Direct,
                chat_id: "7".into(),
                thread_id: None,
            },
            sender: chela_channel::Sender {
                id: sender_id.into(),
                name: "chela:heartbeat".into(),
                username: None,
            },
            message_id: message_id.into(),
            text: "HEARTBEAT".into(),
            reply_to: None,
            mentioned: true,
            timestamp_ms: 0,
            interaction: None,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn only_chelas_own_scheduled_turns_count_as_scheduled() {
        assert!(is_scheduled(&inbound(SYSTEM_SENDER, "cron:heartbeat:5")));
        // A person who named themselves like the heartbeat, or a platform message id.
        assert!(!is_scheduled(&inbound("7", "cron:heartbeat:5")));
        assert!(!is_scheduled(&inbound(SYSTEM_SENDER, "41")));
        let pending = PendingTurn {
            session_key: "k".into(),
            inbound: inbound("7", "41"),
            queued_ms: 0,
        };
        assert!(!queued_turn(1, &pending).scheduled);
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
