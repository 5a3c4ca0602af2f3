//! Summary requests: a last user text holding a `<conversation>` ... `</conversation>` block
//! (how chela's compaction asks for a summary) is answered with
//! `summary: <n> lines of conversation`, `n` being the non-empty lines inside the block, so
//! tests can recognise the summary in later prompts. Directives inside the block are not
//! acted on.

use super::script::{Answer, Reply};

/// The reply to a summary request, or `None` when `user` is not one.
pub(crate) fn reply(user: &str) -> Option<Reply> {
    let start = user.find("<conversation>")? + "<conversation>".len();
    let end = start + user[start..].find("</conversation>")?;
    let lines = user[start..end]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    let text = format!("summary: {lines} lines of conversation");
    Some(Reply::Answer(Answer {
        chunks: vec![text],
        ..Answer::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_block_is_summarized_by_line_count() {
        let text =
            "<conversation>\n[user]: tool ls {}\n\n[assistant]: hi\n</conversation>\n\nSummarize.";
        let Some(Reply::Answer(answer)) = reply(text) else {
            panic!("not a summary request");
        };
        assert_eq!(answer.full_text(), "summary: 2 lines of conversation");
        assert_eq!(reply("tool ls {}"), None);
        assert_eq!(reply("<conversation> never closed"), None);
    }
}
