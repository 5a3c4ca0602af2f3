//! Polls in a message create: `poll_of` checks one as Discord does and gives the `poll` the
//! message shows.

use serde_json::{Value, json};

use super::error::ApiError;

/// Longest poll question, in characters.
const MAX_QUESTION: usize = 300;
/// Longest poll answer, in characters.
const MAX_ANSWER: usize = 55;
/// Most poll answers.
const MAX_ANSWERS: usize = 10;

/// The `poll` of a message create, as the message shows it (answers numbered from 1), or
/// `None`; a poll without question text, with 1 or more than 10 answers, or with a text too
/// long is 400 50035 on `poll`.
pub(crate) fn poll_of(data: &Value) -> Result<Option<Value>, ApiError> {
    let Some(poll) = data.get("poll").filter(|p| !p.is_null()) else {
        return Ok(None);
    };
    let invalid = |what: &str| ApiError::invalid_form("poll", "BASE_TYPE_BAD_LENGTH", what);
    let question = poll["question"]["text"].as_str().unwrap_or("");
    if question.is_empty() || question.chars().count() > MAX_QUESTION {
        return Err(invalid("Must be between 1 and 300 in length."));
    }
    let answers = poll["answers"].as_array().cloned().unwrap_or_default();
    if answers.is_empty() || answers.len() > MAX_ANSWERS {
        return Err(invalid("Must be between 1 and 10 in length."));
    }
    let mut shown = Vec::new();
    for (n, answer) in answers.iter().enumerate() {
        let text = answer["poll_media"]["text"].as_str().unwrap_or("");
        if text.is_empty() || text.chars().count() > MAX_ANSWER {
            return Err(invalid("Must be between 1 and 55 in length."));
        }
        shown.push(json!({ "answer_id": n + 1, "poll_media": { "text": text } }));
    }
    Ok(Some(json!({
        "question": { "text": question },
        "answers": shown,
        "allow_multiselect": poll["allow_multiselect"].as_bool().unwrap_or(false),
        "layout_type": 1,
        "expiry": null,
        "duration_hours": poll["duration"].as_u64().unwrap_or(24),
    })))
}
