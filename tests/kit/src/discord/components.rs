//! Message components the bot sends: action rows of buttons or of one string select menu,
//! checked as Discord checks them (at most 5 rows; a row of 1 to 5 buttons, each of type 2
//! with a style 1 to 4, a label of at most 80 characters and a `custom_id` of 1 to 100
//! characters, unique in the message; or a row holding one select of type 3 with 1 to 25
//! options, each with a label and a value of 1 to 100 characters, values unique).

use serde_json::Value;

use super::error::ApiError;

/// Rows per message, and buttons per row.
const MAX: usize = 5;

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_form(field, "COMPONENT_INVALID", message)
}

/// The `components` of a create or edit body, checked: `None` when the body says nothing
/// of them, `Some(empty)` when it clears them (`[]` or `null`).
pub(crate) fn components_of(body: &Value) -> Result<Option<Vec<Value>>, ApiError> {
    let rows = match body.get("components") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(Vec::new())),
        Some(Value::Array(rows)) => rows.clone(),
        Some(_) => return Err(invalid("components", "Must be an array.")),
    };
    if rows.len() > MAX {
        return Err(invalid("components", "Must be 5 or fewer in length."));
    }
    let mut ids = Vec::new();
    for row in &rows {
        let items = row["components"].as_array().cloned().unwrap_or_default();
        if row["type"] != 1 || items.is_empty() || items.len() > MAX {
            return Err(invalid("components", "An action row holds 1 to 5 buttons."));
        }
        if items[0]["type"] == 3 {
            check_select(&items, &mut ids)?;
            continue;
        }
        for button in &items {
            check_button(button, &mut ids)?;
        }
    }
    Ok(Some(rows))
}

/// One button, whose `custom_id` joins `ids`.
fn check_button(button: &Value, ids: &mut Vec<String>) -> Result<(), ApiError> {
    let style = button["style"].as_u64().unwrap_or(0);
    if button["type"] != 2 || !(1..=4).contains(&style) {
        return Err(invalid(
            "components",
            "Only buttons of style 1 to 4 are supported.",
        ));
    }
    check_id(button["custom_id"].as_str().unwrap_or(""), ids)?;
    if button["label"].as_str().unwrap_or("").chars().count() > 80 {
        return Err(invalid("label", "Must be 80 or fewer in length."));
    }
    Ok(())
}

/// A row's string select: alone in its row, 1 to 25 options with unique values.
fn check_select(items: &[Value], ids: &mut Vec<String>) -> Result<(), ApiError> {
    let [select] = items else {
        return Err(invalid("components", "A select menu is alone in its row."));
    };
    check_id(select["custom_id"].as_str().unwrap_or(""), ids)?;
    let options = select["options"].as_array().cloned().unwrap_or_default();
    if options.is_empty() || options.len() > 25 {
        return Err(invalid("options", "Must be between 1 and 25 in length."));
    }
    let mut values = Vec::new();
    for option in &options {
        let label = option["label"].as_str().unwrap_or("");
        let value = option["value"].as_str().unwrap_or("").to_owned();
        let within = |t: &str| (1..=100).contains(&t.chars().count());
        if !within(label) || !within(&value) || values.contains(&value) {
            return Err(invalid(
                "options",
                "Each option has a label and a unique value of 1 to 100 characters.",
            ));
        }
        values.push(value);
    }
    Ok(())
}

/// A `custom_id`: 1 to 100 characters, unique in the message.
fn check_id(id: &str, ids: &mut Vec<String>) -> Result<(), ApiError> {
    if id.is_empty() || id.chars().count() > 100 || ids.iter().any(|i| i == id) {
        return Err(invalid(
            "custom_id",
            "Must be 1 to 100 characters and unique.",
        ));
    }
    ids.push(id.to_owned());
    Ok(())
}

/// The string select menu of a message's `components`: its `custom_id` and its options as
/// (label, value).
pub(crate) fn menu_of(message: &Value) -> Option<(String, Vec<(String, String)>)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let select = message["components"]
        .as_array()?
        .iter()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == 3)?;
    let options = select["options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| (text(&o["label"]), text(&o["value"])))
        .collect();
    Some((text(&select["custom_id"]), options))
}

/// The buttons of a message's `components`, row by row, as (label, custom_id).
pub(crate) fn buttons_of(message: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    message["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == 2)
        .map(|b| (text(&b["label"]), text(&b["custom_id"])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(buttons: Value) -> Value {
        json!({"components": [{"type": 1, "components": buttons}]})
    }

    #[test]
    fn buttons_are_read_and_checked() {
        let ok = row(json!([{"type": 2, "style": 2, "label": "Allow", "custom_id": "a"}]));
        let rows = components_of(&ok).unwrap().unwrap();
        assert_eq!(
            buttons_of(&json!({"components": rows})),
            vec![("Allow".into(), "a".into())]
        );
        assert!(components_of(&json!({})).unwrap().is_none());
        assert_eq!(
            components_of(&json!({"components": null})).unwrap(),
            Some(vec![])
        );
        let long = "x".repeat(101);
        let bad = [
            row(json!([{"type": 2, "style": 2, "label": "A", "custom_id": long}])),
            row(json!([{"type": 2, "style": 2, "label": "A", "custom_id": ""}])),
            row(json!([{"type": 2, "style": 9, "label": "A", "custom_id": "a"}])),
            row(
                json!([{"type": 2, "style": 2, "label": "A", "custom_id": "a"},
                       {"type": 2, "style": 2, "label": "B", "custom_id": "a"}]),
            ),
            row(json!([])),
            row(json!([{"type": 3, "custom_id": "m", "options": []}])),
            row(json!([{"type": 3, "custom_id": "m",
                        "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "a"}]}])),
            row(
                json!([{"type": 3, "custom_id": "m", "options": [{"label": "A", "value": "a"}]},
                       {"type": 2, "style": 2, "label": "B", "custom_id": "b"}]),
            ),
        ];
        for body in bad {
            assert!(components_of(&body).is_err(), "{body}");
        }
    }

    #[test]
    fn a_select_menu_is_read_and_checked() {
        let ok = row(json!([{"type": 3, "custom_id": "menu:a",
                             "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}]}]));
        let rows = components_of(&ok).unwrap().unwrap();
        let message = json!({ "components": rows });
        assert_eq!(
            menu_of(&message),
            Some((
                "menu:a".into(),
                vec![("A".into(), "a".into()), ("B".into(), "b".into())]
            ))
        );
        assert!(buttons_of(&message).is_empty());
    }
}
