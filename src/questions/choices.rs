//! Choices offered under a command's answer in a direct chat, as buttons on Telegram and a
//! select menu on Discord (`/model` with no name: the models `[model] models` allows and the
//! provider's server lists; `/queue` with no mode: the queue modes). A choice stands for the
//! typed command it names (`/model NAME`), taken in as the presser's own message in the same
//! conversation, so the rules of the typed command apply to it unchanged (a refusal is
//! answered as for typing it). One choice per menu: the menu then says what was chosen and
//! loses its buttons.
//!
//! Kept in memory, the newest [`MENUS_KEPT`] menus: an older or restarted one is told to
//! type the command.

use std::collections::VecDeque;
use std::sync::Mutex;

use chela_channel::{Button, Conversation, Inbound, Press, SentMessage};

use super::Desk;
use super::buttons::Asked;

/// Menus kept at once (the oldest go first).
const MENUS_KEPT: usize = 256;

/// A menu shown in a chat: its buttons' data and the command each stands for.
#[derive(Debug)]
struct Menu {
    to: Conversation,
    /// (button data, label, command).
    choices: Vec<(String, String, String)>,
    asked: Option<Asked>,
}

/// The menus waiting for a press.
#[derive(Debug, Default)]
pub struct Choices {
    menus: Mutex<VecDeque<Menu>>,
    /// The button data of menus used already, newest last (at most [`MENUS_KEPT`] menus'
    /// worth).
    used: Mutex<VecDeque<String>>,
}

/// What a press on a menu that was used already is told.
pub const USED: &str = "This menu was used already: type the command to choose again.";

/// A press on a menu's button: the typed command it stands for, and the menu's message.
#[derive(Debug)]
pub struct Chosen {
    /// The command, as typed (`/model gpt-4.1`).
    pub command: String,
    /// The button's label.
    pub label: String,
    /// Where the menu was asked, once sent.
    asked: Option<Asked>,
}

impl Choices {
    /// Buttons for `choices` (label, command) under a menu in `to`.
    fn offer(&self, to: &Conversation, choices: &[(String, String)]) -> Vec<Button> {
        let mut menus = self.lock();
        let menu: Vec<(String, String, String)> = choices
            .iter()
            .map(|(label, command)| {
                let data = uuid::Uuid::new_v4().simple().to_string();
                (data, label.clone(), command.clone())
            })
            .collect();
        let buttons = menu
            .iter()
            .map(|(data, label, _)| Button {
                label: label.clone(),
                data: data.clone(),
            })
            .collect();
        menus.push_back(Menu {
            to: to.clone(),
            choices: menu,
            asked: None,
        });
        while menus.len() > MENUS_KEPT {
            menus.pop_front();
        }
        buttons
    }

    /// The menu holding the button `data` was sent as `message` with `text`.
    fn asked(&self, data: &str, message: SentMessage, text: String) {
        let mut menus = self.lock();
        if let Some(menu) = menus
            .iter_mut()
            .find(|m| m.choices.iter().any(|c| c.0 == data))
        {
            let to = menu.to.clone();
            menu.asked = Some(Asked { to, message, text });
        }
    }

    /// Takes the menu of button `data` pressed in `to`: the command it stands for; `None`
    /// when no menu here has that button (or it is another conversation's).
    fn take(&self, data: &str, to: &Conversation) -> Option<Chosen> {
        let mut menus = self.lock();
        let at = menus
            .iter()
            .position(|m| &m.to == to && m.choices.iter().any(|c| c.0 == data))?;
        let menu = menus.remove(at)?;
        if let Ok(mut used) = self.used.lock() {
            used.extend(menu.choices.iter().map(|c| c.0.clone()));
            while used.len() > MENUS_KEPT * 5 {
                used.pop_front();
            }
        }
        let (_, label, command) = menu.choices.into_iter().find(|c| c.0 == data)?;
        Some(Chosen {
            command,
            label,
            asked: menu.asked,
        })
    }

    /// Whether button `data` was on a menu used already.
    pub fn was_used(&self, data: &str) -> bool {
        self.used
            .lock()
            .is_ok_and(|used| used.iter().any(|d| d == data))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Menu>> {
        self.menus
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Desk {
    /// Shows `text` in `to` with a button for each of `choices` (label, command); where the
    /// channel has no buttons, the text alone.
    pub async fn offer_choices(&self, to: &Conversation, text: &str, choices: &[(String, String)]) {
        let buttons = self.choices.offer(to, choices);
        if let Some(message) = self.notices.offer(to, text, &buttons).await
            && let Some(first) = buttons.first()
        {
            self.choices.asked(&first.data, message, text.to_owned());
        }
    }

    /// A press on a menu's button: the presser's own message standing for the command
    /// (to be taken in like a typed one), with the menu edited to say what was pressed;
    /// `None` when `press` is on no menu.
    pub(super) async fn choose(&self, press: &Press) -> Option<Inbound> {
        let chosen = self.choices.take(&press.data, &press.conversation)?;
        if let Some(asked) = &chosen.asked {
            let text = format!("{}\nChosen: {}.", asked.text, chosen.label);
            self.notices.edit(&asked.to, &asked.message, &text).await;
        }
        Some(Inbound {
            conversation: press.conversation.clone(),
            sender: press.sender.clone(),
            message_id: format!("press:{}", press.handle),
            text: chosen.command,
            reply_to: None,
            mentioned: true,
            timestamp_ms: crate::domain::message::now_ms(),
            interaction: None,
            attachments: Vec::new(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn chat(id: &str) -> Conversation {
        Conversation {
            channel: "telegram".into(),
            account: "default".into(),
            kind: chela_channel::ChatKind::Direct,
            chat_id: id.into(),
            thread_id: None,
        }
    }

    #[test]
    fn a_menu_is_taken_once_and_only_in_its_conversation() {
        let choices = Choices::default();
        let offered = choices.offer(
            &chat("1"),
            &[
                ("gpt".into(), "/model gpt".into()),
                ("Default".into(), "/model default".into()),
            ],
        );
        assert_eq!(offered.len(), 2);
        assert!(!offered[0].data.contains("gpt"), "opaque");
        assert!(
            choices.take(&offered[0].data, &chat("2")).is_none(),
            "another chat"
        );
        let chosen = choices.take(&offered[0].data, &chat("1")).unwrap();
        assert_eq!(
            (chosen.command.as_str(), chosen.label.as_str()),
            ("/model gpt", "gpt")
        );
        assert!(
            choices.take(&offered[1].data, &chat("1")).is_none(),
            "used up"
        );
        assert!(choices.was_used(&offered[1].data));
        assert!(!choices.was_used("other"));
    }

    #[test]
    fn only_the_newest_menus_are_kept() {
        let choices = Choices::default();
        let first = choices.offer(&chat("1"), &[("a".into(), "/queue steer".into())]);
        for _ in 0..MENUS_KEPT {
            choices.offer(&chat("1"), &[("b".into(), "/queue collect".into())]);
        }
        assert!(choices.take(&first[0].data, &chat("1")).is_none());
    }
}
