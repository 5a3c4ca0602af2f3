//! Components under a message: buttons (one action row of at most five, each label cut to
//! Discord's 80 characters) or a string select menu (one row, at most 25 options, labels cut
//! to 100 characters). An entry whose data is longer than Discord's 100-character `custom_id`
//! or option value is left out (chela's data is a short opaque token, so none is).

use chela_channel::Button;
use serenity::builder::{
    CreateActionRow, CreateButton, CreateSelectMenu, CreateSelectMenuKind, CreateSelectMenuOption,
};
use serenity::model::application::ButtonStyle;

/// Buttons in one action row.
const PER_ROW: usize = 5;
/// Characters of a button's label.
const MAX_LABEL: usize = 80;
/// Characters of a button's `custom_id` (and of a select option's value).
const MAX_CUSTOM_ID: usize = 100;
/// Options of a select menu.
const MAX_OPTIONS: usize = 25;
/// Characters of a select option's label.
const MAX_OPTION_LABEL: usize = 100;
/// What an untouched select menu shows.
const PLACEHOLDER: &str = "Choose…";

/// What Discord takes of `options`: a usable data, at most `max`.
fn usable(options: &[Button], max: usize) -> impl Iterator<Item = &Button> {
    options
        .iter()
        .filter(|b| !b.data.is_empty() && b.data.chars().count() <= MAX_CUSTOM_ID)
        .take(max)
}

/// The action rows that show `buttons`.
pub(crate) fn row(buttons: &[Button]) -> Vec<CreateActionRow> {
    let row: Vec<CreateButton> = usable(buttons, PER_ROW)
        .map(|b| {
            let label: String = b.label.chars().take(MAX_LABEL).collect();
            CreateButton::new(b.data.as_str())
                .label(label)
                .style(ButtonStyle::Secondary)
        })
        .collect();
    if row.is_empty() {
        return Vec::new();
    }
    vec![CreateActionRow::Buttons(row)]
}

/// The action row of a select menu offering `options` (one to choose). Its own `custom_id`
/// is `menu:` and the start of the first option's data (unique to the menu, as chela's data
/// is); a choice brings back the chosen option's value.
pub(crate) fn menu(options: &[Button]) -> Vec<CreateActionRow> {
    let Some(first) = usable(options, MAX_OPTIONS).next() else {
        return Vec::new();
    };
    let id: String = format!("menu:{}", first.data)
        .chars()
        .take(MAX_CUSTOM_ID)
        .collect();
    let options: Vec<CreateSelectMenuOption> = usable(options, MAX_OPTIONS)
        .map(|b| {
            let label: String = b.label.chars().take(MAX_OPTION_LABEL).collect();
            CreateSelectMenuOption::new(label, b.data.as_str())
        })
        .collect();
    let select = CreateSelectMenu::new(id, CreateSelectMenuKind::String { options })
        .placeholder(PLACEHOLDER);
    vec![CreateActionRow::SelectMenu(select)]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn button(label: &str, data: &str) -> Button {
        Button {
            label: label.into(),
            data: data.into(),
        }
    }

    #[test]
    fn buttons_go_in_one_row_within_discords_limits() {
        let long = "x".repeat(120);
        let buttons = vec![
            button(&"L".repeat(90), "a"),
            button("too long", &long),
            button("b", "b"),
            button("c", "c"),
            button("d", "d"),
            button("e", "e"),
            button("f", "f"),
        ];
        let json = serde_json::to_value(row(&buttons)).unwrap();
        let row = &json[0]["components"];
        assert_eq!(json[0]["type"], 1);
        assert_eq!(row.as_array().unwrap().len(), 5);
        assert_eq!(row[0]["label"].as_str().unwrap().len(), 80);
        assert_eq!(row[0]["custom_id"], "a");
        assert_eq!(row[0]["type"], 2);
        assert_eq!(row[1]["custom_id"], "b", "the too-long one is left out");
        assert!(super::row(&[]).is_empty());
    }

    #[test]
    fn a_menu_is_one_string_select_within_discords_limits() {
        let options: Vec<Button> = (0..30)
            .map(|i| button(&format!("{i}{}", "L".repeat(120)), &format!("d{i}")))
            .collect();
        let json = serde_json::to_value(menu(&options)).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 1);
        assert_eq!(json[0]["type"], 1);
        let select = &json[0]["components"][0];
        assert_eq!(select["type"], 3);
        assert_eq!(select["custom_id"], "menu:d0");
        let got = select["options"].as_array().unwrap();
        assert_eq!(got.len(), 25);
        assert_eq!(got[0]["value"], "d0");
        assert_eq!(got[0]["label"].as_str().unwrap().chars().count(), 100);
        assert!(menu(&[]).is_empty());
    }
}
