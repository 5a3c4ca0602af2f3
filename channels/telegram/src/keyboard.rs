//! Inline keyboards: the rows of buttons under a message, each button's press bringing back
//! its data as a `callback_query`.

use chela_channel::Button;
use serde_json::{Value, json};

/// Up to this many buttons share one row; more go two to a row (four labels in one row of
/// a phone's width are cut short).
const ONE_ROW: usize = 3;

/// One inline keyboard button whose press brings back `button`'s data.
fn callback_button(button: &Button) -> Value {
    json!({ "text": button.label, "callback_data": button.data })
}

/// The rows showing `buttons` in their order: one row of up to [`ONE_ROW`], else two a row.
pub(crate) fn rows(buttons: &[Button]) -> Vec<Value> {
    let per_row = if buttons.len() <= ONE_ROW { ONE_ROW } else { 2 };
    buttons
        .chunks(per_row)
        .map(|row| Value::Array(row.iter().map(callback_button).collect()))
        .collect()
}

/// A choice: a button per option, one under the other (Telegram has no select menu; long
/// lists read better as a column than as one cramped row).
pub(crate) fn column(options: &[Button]) -> Vec<Value> {
    options
        .iter()
        .map(|b| json!([callback_button(b)]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buttons(n: usize) -> Vec<Button> {
        (0..n)
            .map(|i| Button {
                label: format!("b{i}"),
                data: format!("d{i}"),
            })
            .collect()
    }

    fn shape(rows: &[Value]) -> Vec<usize> {
        rows.iter()
            .map(|r| r.as_array().map_or(0, Vec::len))
            .collect()
    }

    #[test]
    fn three_buttons_share_a_row_and_more_go_two_a_row() {
        assert_eq!(shape(&rows(&buttons(2))), [2]);
        assert_eq!(shape(&rows(&buttons(3))), [3]);
        assert_eq!(shape(&rows(&buttons(4))), [2, 2]);
        assert_eq!(shape(&rows(&buttons(5))), [2, 2, 1]);
        assert_eq!(shape(&column(&buttons(3))), [1, 1, 1]);
        assert_eq!(
            rows(&buttons(1))[0][0],
            json!({ "text": "b0", "callback_data": "d0" })
        );
    }
}
