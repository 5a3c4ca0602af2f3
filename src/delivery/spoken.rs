//! What of a final is spoken (docs/voice.md): its markdown read as plain text. Emphasis,
//! headings, list markers, link targets and HTML go; code blocks are left out (read aloud
//! they are noise), inline code stays as its text; table cells are read in turn.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The plain text `markdown` reads as, one line per block, blank lines dropped.
pub fn spoken(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::new();
    let mut in_code = false;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(TagEnd::CodeBlock) => in_code = false,
            Event::Text(text) | Event::Code(text) if !in_code => out.push_str(&text),
            Event::SoftBreak => out.push(' '),
            Event::HardBreak | Event::Rule => out.push('\n'),
            Event::End(TagEnd::TableCell) => out.push_str(", "),
            Event::End(end) if ends_a_line(&end) => out.push('\n'),
            _ => {}
        }
    }
    out.lines()
        .map(|line| line.trim().trim_end_matches(',').trim_end())
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether [`spoken`] keeps all `markdown` says: no code block, link or picture left out. A
/// voice note stands in for the text (`mode = "instead"`) only then.
pub fn says_all(markdown: &str) -> bool {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    !Parser::new_ext(markdown, options).any(|event| match event {
        Event::Start(Tag::CodeBlock(_) | Tag::Link { .. } | Tag::Image { .. }) => true,
        Event::Html(_) | Event::InlineHtml(_) => true,
        // A bare address is plain text to the parser, but a link to whoever reads it.
        Event::Text(text) => text.contains("://") || text.contains("www."),
        _ => false,
    })
}

/// Whether the block `end` closes ends a spoken line.
fn ends_a_line(end: &TagEnd) -> bool {
    matches!(
        end,
        TagEnd::Paragraph
            | TagEnd::Heading(_)
            | TagEnd::Item
            | TagEnd::BlockQuote(_)
            | TagEnd::TableHead
            | TagEnd::TableRow
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_read_as_plain_text() {
        let text = "# Weather\n\nIt is **warm** and _sunny_ in [Paris](https://paris.fr).\n\n\
                    - take `sunscreen`\n- drink water\n\n```sh\nrm -rf /tmp/x\n```\n\n\
                    | day | high |\n|---|---|\n| Mon | 25 |\n\n> quoted ~~not~~ line";
        assert_eq!(
            spoken(text),
            "Weather\nIt is warm and sunny in Paris.\ntake sunscreen\ndrink water\n\
             day, high\nMon, 25\nquoted not line"
        );
    }

    #[test]
    fn code_links_and_pictures_are_not_all_said() {
        assert!(says_all("It is **warm**.\n- take `sunscreen`"));
        assert!(!says_all("Run this:\n```sh\nmake\n```"));
        assert!(!says_all("See [the docs](https://docs.example)."));
        assert!(!says_all("![chart](chart.png)"));
        assert!(!says_all("see https://x.example/a for more"));
        assert!(!says_all("at www.example.com"));
        assert!(!says_all("a <a href=\"x\">link</a>"));
    }

    #[test]
    fn plain_text_stays_and_code_alone_says_nothing() {
        assert_eq!(spoken("ok: hello there"), "ok: hello there");
        assert_eq!(spoken("one\ntwo"), "one two");
        assert_eq!(spoken("```\nfn main() {}\n```"), "");
        assert_eq!(spoken("a <b>bold</b> word"), "a bold word");
    }
}
