//! The terminal's colours: the person's input, tool lines, errors, notes and the parts of a
//! rendered reply each have a style; with colour off (`NO_COLOR`, or output that is not a
//! terminal) nothing but the text is written.

use anstyle::{AnsiColor, Effects, Style};

/// The person's prompt.
pub const PROMPT: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
/// What the person typed.
pub const INPUT: Style = Style::new().bold();
/// A tool call's line.
pub const TOOL: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
/// An error or a failed tool.
pub const ERROR: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
/// A note of the chat itself (banner, usage, spinner).
pub const NOTE: Style = Style::new().dimmed();
/// A heading of a reply.
pub const HEADING: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Magenta)));
/// Code inside a line, and code blocks no syntax is known for.
pub const CODE: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
/// A link's text.
pub const LINK: Style = Style::new()
    .underline()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Blue)));
/// A quote's bar, a fence, a table's lines.
pub const FRAME: Style = Style::new().dimmed();
/// Emphasis.
pub const ITALIC: Style = Style::new().italic();
/// Strong emphasis.
pub const BOLD: Style = Style::new().bold();
/// Struck-through text.
pub const STRUCK: Style = Style::new().strikethrough();

/// Whether styles are written, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Colour on or off.
    pub const fn new(on: bool) -> Paint {
        Paint { on }
    }

    /// Colour for a terminal, unless `NO_COLOR` is set to anything but the empty string
    /// (<https://no-color.org>).
    pub fn for_terminal(is_terminal: bool) -> Paint {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint::new(is_terminal && !no_color)
    }

    /// Whether styles are written.
    pub fn on(self) -> bool {
        self.on
    }

    /// `text` in `style` (the text alone when colour is off).
    pub fn paint(self, style: Style, text: &str) -> String {
        if !self.on || text.is_empty() || style == Style::new() {
            return text.to_owned();
        }
        format!("{style}{text}{style:#}")
    }
}

/// The styles of `stack` worn together: the effects of all, the colour of the innermost
/// that has one.
pub fn combine(stack: &[Style]) -> Style {
    stack.iter().fold(Style::new(), |worn, style| {
        let effects: Effects = worn.get_effects() | style.get_effects();
        let worn = worn.effects(effects);
        match style.get_fg_color() {
            Some(colour) => worn.fg_color(Some(colour)),
            None => worn,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_writes_the_text_alone() {
        assert_eq!(Paint::new(false).paint(ERROR, "boom"), "boom");
        let on = Paint::new(true).paint(ERROR, "boom");
        assert!(on.starts_with("\x1b[") && on.contains("boom") && on.ends_with("\x1b[0m"));
    }

    #[test]
    fn styles_worn_together_keep_every_effect_and_the_inner_colour() {
        let worn = combine(&[HEADING, ITALIC, CODE]);
        assert!(worn.get_effects().contains(Effects::BOLD | Effects::ITALIC));
        assert_eq!(worn.get_fg_color(), CODE.get_fg_color());
    }
}
