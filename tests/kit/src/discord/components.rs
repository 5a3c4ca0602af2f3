//! Message components the bot sends: action rows of buttons, checked as Discord checks them
//! (at most 5 rows of at most 5 buttons; each button of type 2 with a style 1 to 4, a label
//! of at most 80 characters and a `custom_id` of 1 to 100 characters, unique in the message).

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
        let buttons = row["components"].as_array().cloned().unwrap_or_default();
        if row["type"] != 1 || buttons.is_empty() || buttons.len() > MAX {
            return Err(invalid("components", "An action row holds 1 to 5 buttons."));
        }
        for button in &buttons {
            let id = button["custom_id"].as_str().unwrap_or("");
            let label = button["label"].as_str().unwrap_or("");
            let style = button["style"].as_u64().unwrap_or(0);
            if button["type"] != 2 || !(1..=4).contains(&style) {
                return Err(invalid(
                    "components",
                    "Only buttons of style 1 to 4 are supported.",
                ));
            }
            if id.is_empty() || id.chars().count() > 100 || ids.contains(&id.to_owned()) {
                return Err(invalid(
                    "custom_id",
                    "Must be 1 to 100 characters and unique.",
                ));
            }
            if label.chars().count() > 80 {
                return Err(invalid("label", "Must be 80 or fewer in length."));
            }
            ids.push(id.to_owned());
        }
    }
    Ok(Some(rows))
}

/// The buttons of a message's `components`, row by row, as (label, custom_id).
pub(crate) fn buttons_of(message: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    message["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
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
        ];
        for body in bad {
            assert!(components_of(&body).is_err(), "{body}");
        }
    }
}
