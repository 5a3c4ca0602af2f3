//! Buttons under a message: one action row of at most five, each label cut to Discord's 80
//! characters. A button whose data is longer than Discord's 100-character `custom_id` is left
//! out (chela's data is a short opaque token, so none is).

use chela_channel::Button;
use serenity::builder::{CreateActionRow, CreateButton};
use serenity::model::application::ButtonStyle;

/// Buttons in one action row.
const PER_ROW: usize = 5;
/// Characters of a button's label.
const MAX_LABEL: usize = 80;
/// Characters of a button's `custom_id`.
const MAX_CUSTOM_ID: usize = 100;

/// The action rows that show `buttons`.
pub(crate) fn row(buttons: &[Button]) -> Vec<CreateActionRow> {
    let row: Vec<CreateButton> = buttons
        .iter()
        .filter(|b| !b.data.is_empty() && b.data.chars().count() <= MAX_CUSTOM_ID)
        .take(PER_ROW)
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
}
