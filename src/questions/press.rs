//! A press on a question's button: answered like the typed answer it stands for, by the
//! same rule (an exec approval or a pairing request: owners only; a coding agent's permission
//! question: owners and its binding's owner), and told to the presser alone.

use chela_channel::{Inbound, Press};

use super::Desk;
use super::buttons::{Pressed, UNKNOWN};
use super::pairing::{Paired, PairingPressed};
use crate::acp::permission::Decision;
use crate::agent::approval::Approval;

/// The note to one who may not answer an approval.
const OWNERS_ONLY: &str = "Only the bot's owners can answer this (as /approve).";

/// What a press leaves for the gateway to do.
#[derive(Debug)]
pub enum AfterPress {
    /// A stranger was approved: tell them, and answer what they sent meanwhile.
    Paired(Paired),
    /// A menu's choice: take this message in as the presser's own typed command.
    Command(Box<Inbound>),
}

/// Answers `press` (by a bot owner when `owner`): the question it belongs to is answered,
/// or the presser is told why not. The message itself changes when the question ends. An
/// approved pairing request gives the stranger back; a menu's choice, the command.
pub async fn press(desk: &Desk, press: &Press, owner: bool) -> Option<AfterPress> {
    let (note, after) = match desk.pairing.pressed(&press.data) {
        Some(PairingPressed::Ended(why)) => (why, None),
        Some(PairingPressed::Waiting { .. }) if !owner => {
            ("Only the bot's owners can answer this.".to_owned(), None)
        }
        Some(PairingPressed::Waiting { key, approve }) => {
            let (note, paired) = desk.answer_pairing(&key, approve, &press.sender.name).await;
            (note, paired.map(AfterPress::Paired))
        }
        None => match desk.choose(press).await {
            Some(command) => {
                let note = format!("Chosen: {}", command.text);
                (note, Some(AfterPress::Command(Box::new(command))))
            }
            None if desk.choices.was_used(&press.data) => (super::choices::USED.to_owned(), None),
            None => (answer(desk, press, owner), None),
        },
    };
    let channel = &press.conversation.channel;
    desk.notices
        .answer_press(channel, &press.handle, &note)
        .await;
    after
}

/// What a press on a question's button did, for the presser.
fn answer(desk: &Desk, press: &Press, owner: bool) -> String {
    if let Some(pressed) = desk.permission_buttons.pressed(&press.data) {
        return permission(desk, press, owner, pressed);
    }
    match desk.buttons.pressed(&press.data) {
        None => UNKNOWN.to_owned(),
        Some(Pressed::Ended(why)) => why,
        Some(Pressed::Waiting { .. }) if !owner => OWNERS_ONLY.to_owned(),
        Some(Pressed::Waiting { id, decision, .. }) => {
            let answer = || desk.approvals.answer(&id, decision).is_ok();
            match desk.buttons.answer_by(&id, &press.sender.name, answer) {
                true => said(decision).to_owned(),
                false => UNKNOWN.to_owned(),
            }
        }
    }
}

/// A press on a coding agent's permission question: owners and the binding's owner answer.
fn permission(desk: &Desk, press: &Press, owner: bool, pressed: Pressed<Decision>) -> String {
    let (id, decision, label, also) = match pressed {
        Pressed::Ended(why) => return why,
        Pressed::Waiting {
            id,
            decision,
            label,
            also,
        } => (id, decision, label, also),
    };
    let who = format!("{}:{}", press.conversation.channel, press.sender.id);
    if !owner && also.as_deref() != Some(who.as_str()) {
        return "Only the owner of this coding agent's session or the bot's owners can answer this."
            .to_owned();
    }
    let answer = || desk.permissions.answer(&id, decision).is_ok();
    match desk
        .permission_buttons
        .answer_by(&id, &press.sender.name, answer)
    {
        true => match decision {
            Decision::Allow => "Allowed.".to_owned(),
            Decision::Deny => "Denied.".to_owned(),
            Decision::Chosen(_) => format!("Chosen: {label}."),
        },
        false => "This question has ended.".to_owned(),
    }
}

/// The presser's note for an answer given.
fn said(decision: Approval) -> &'static str {
    match decision {
        Approval::AllowOnce => "Allowed once.",
        Approval::AllowAlways => "Allowed from now on.",
        _ => "Denied.",
    }
}
