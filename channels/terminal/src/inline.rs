//! One line of a reply's markdown in terminal styles (pulldown-cmark parses it): headings,
//! emphasis, code, links, list items, quotes, rules, task boxes. The marks themselves
//! (`#`, `**`, backticks) are left out.

use anstyle::Style;
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::style::{self, Paint};

/// Writes inline events in styles, keeping the styles that are open.
pub struct Styled {
    paint: Paint,
    stack: Vec<Style>,
    /// What was written, with its escape sequences.
    pub text: String,
    /// The next list item's number (`None`: a bullet).
    number: Option<u64>,
    /// Where each open link goes.
    links: Vec<String>,
}

impl Styled {
    /// Nothing written yet.
    pub fn new(paint: Paint) -> Styled {
        Styled {
            paint,
            stack: Vec::new(),
            text: String::new(),
            number: None,
            links: Vec::new(),
        }
    }

    /// `text` in the styles open, then `style` on top.
    fn write(&mut self, style: Option<Style>, text: &str) {
        let mut worn = self.stack.clone();
        worn.extend(style);
        let painted = self.paint.paint(style::combine(&worn), text);
        self.text.push_str(&painted);
    }

    /// Takes in one event of an inline run (a line, a table cell).
    pub fn event(&mut self, event: Event<'_>, cols: usize) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.write(None, &text),
            Event::Code(code) => self.write(Some(style::CODE), &code),
            Event::InlineHtml(html) | Event::Html(html) => self.write(None, &html),
            Event::SoftBreak | Event::HardBreak => self.text.push(' '),
            Event::Rule => {
                let rule = "─".repeat(cols.clamp(3, 40));
                self.write(Some(style::FRAME), &rule);
            }
            Event::TaskListMarker(done) => self.write(None, if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(name) => self.write(None, &format!("[^{name}]")),
            other => {
                // Math and the like are not asked for (no options): shown as their source.
                tracing::trace!(?other, "markdown event shown as text");
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => {
                let style = match level {
                    HeadingLevel::H1 => style::HEADING.underline(),
                    _ => style::HEADING,
                };
                self.stack.push(style);
            }
            Tag::Emphasis => self.stack.push(style::ITALIC),
            Tag::Strong => self.stack.push(style::BOLD),
            Tag::Strikethrough => self.stack.push(style::STRUCK),
            Tag::CodeBlock(_) => self.stack.push(style::CODE),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.stack.push(style::LINK);
            }
            Tag::BlockQuote(_) => self.write(Some(style::FRAME), "│ "),
            Tag::List(first) => self.number = first,
            Tag::Item => match self.number {
                Some(n) => {
                    self.write(Some(style::FRAME), &format!("{n}. "));
                    self.number = Some(n + 1);
                }
                None => self.write(Some(style::FRAME), "• "),
            },
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_)
            | TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::CodeBlock => {
                self.stack.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.stack.pop();
                let url = self.links.pop().unwrap_or_default();
                if !url.is_empty() && !self.text.contains(url.as_str()) {
                    self.write(Some(style::FRAME), &format!(" ({url})"));
                }
            }
            _ => {}
        }
    }
}

/// The markdown options of a reply (a table's rows are gathered and drawn apart).
pub fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_TABLES
}

/// One line of a reply in styles, its indentation kept (an indented item stays an item, not
/// a code block).
pub fn line(line: &str, paint: Paint, cols: usize) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let mut styled = Styled::new(paint);
    for event in Parser::new_ext(body, options()) {
        styled.event(event, cols);
    }
    format!("{indent}{}", styled.text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::width::strip;

    fn shown(text: &str) -> String {
        strip(&line(text, Paint::new(true), 80))
    }

    #[test]
    fn marks_are_left_out_and_items_get_bullets() {
        assert_eq!(shown("# Title"), "Title");
        assert_eq!(
            shown("Some **bold** and *it* and `code`"),
            "Some bold and it and code"
        );
        assert_eq!(shown("- one"), "• one");
        assert_eq!(shown("  - nested"), "  • nested");
        assert_eq!(shown("3. third"), "3. third");
        assert_eq!(shown("> quoted"), "│ quoted");
        assert_eq!(shown("- [x] done"), "• ☑ done");
        assert_eq!(
            shown("see [docs](https://x.y/z)"),
            "see docs (https://x.y/z)"
        );
        assert_eq!(shown("---"), "─".repeat(40));
    }

    #[test]
    fn styles_are_written_only_with_colour_on() {
        let coloured = line("**bold** `x`", Paint::new(true), 80);
        assert!(coloured.contains("\x1b[1m"), "{coloured:?}");
        assert_eq!(line("**bold** `x`", Paint::new(false), 80), "bold x");
    }
}
