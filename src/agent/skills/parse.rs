//! SKILL.md front matter: the YAML subset skills use, parsed by hand (no YAML crate).
//!
//! The file starts with a `---` line and the front matter ends at the next `---` (or `...`)
//! line. Inside, one `key: value` per line at column 0; `#` starts a comment. Values are plain
//! (`description: Does X`), `"double quoted"` (with `\"`, `\\`, `\n`, `\t`, `\uXXXX` escapes)
//! or `'single quoted'` (`''` is a quote); a plain or quoted value may continue on more-indented
//! lines (joined with a space), and `>` / `|` start a folded / literal block. `requires:` holds
//! an indented block of `bins`, `env`, `config` and `os`, each a `[a, b]` list, one value, or
//! `- item` lines. Other keys (`license`, `metadata`, ...) and their indented blocks are ignored.

use std::fmt;

/// The OS names a skill may be limited to (values of `std::env::consts::OS`).
pub const OS_NAMES: &[&str] = &["linux", "macos", "windows"];

/// What a SKILL.md's front matter says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrontMatter {
    /// Skill name (one line, not empty).
    pub name: String,
    /// What the skill is for (not empty).
    pub description: String,
    /// What must hold for the skill to be offered.
    pub requires: Requires,
}

/// A skill's requirements; every one must hold for it to load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requires {
    /// Programs that must be found on `PATH`.
    pub bins: Vec<String>,
    /// Environment variables that must be set and not empty.
    pub env: Vec<String>,
    /// Dotted chela config keys that must be set (`channels.telegram.token`).
    pub config: Vec<String>,
    /// Operating systems the skill works on (see [`OS_NAMES`]); empty: all.
    pub os: Vec<String>,
}

/// Why a SKILL.md could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line in the file, when the error is on one line.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParseError {}

/// One front-matter line: its number, its indentation and the rest, trailing space removed.
struct Line<'a> {
    number: usize,
    indent: usize,
    text: &'a str,
}

impl Line<'_> {
    fn is_blank(&self) -> bool {
        self.text.is_empty()
    }

    fn is_skippable(&self) -> bool {
        self.text.is_empty() || self.text.starts_with('#')
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: Some(self.number),
            message: message.into(),
        }
    }
}

/// Parses the front matter of a SKILL.md (the body after it is not looked at).
pub fn parse(text: &str) -> Result<FrontMatter, ParseError> {
    let whole = |message: &str| ParseError {
        line: None,
        message: message.into(),
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut raw_lines = text.lines();
    if raw_lines.next().map(str::trim_end) != Some("---") {
        return Err(whole(
            "no front matter: SKILL.md must start with a `---` line",
        ));
    }
    let mut lines = Vec::new();
    let mut closed = false;
    for (i, raw) in raw_lines.enumerate() {
        let raw = raw.trim_end();
        if raw == "---" || raw == "..." {
            closed = true;
            break;
        }
        let text = raw.trim_start_matches(' ');
        let line = Line {
            number: i + 2,
            indent: raw.len() - text.len(),
            text,
        };
        if text.starts_with('\t') {
            return Err(line.error("indent with spaces, not tabs"));
        }
        lines.push(line);
    }
    if !closed {
        return Err(whole("the front matter is not closed by a `---` line"));
    }
    front_matter(&lines)
}

fn front_matter(lines: &[Line<'_>]) -> Result<FrontMatter, ParseError> {
    let mut out = FrontMatter::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        if line.is_skippable() {
            i += 1;
            continue;
        }
        if line.indent > 0 {
            return Err(line.error("unexpected indentation"));
        }
        let (key, value) = split_key(line)?;
        let end = block_end(lines, i + 1, |l| l.indent > 0);
        let block = &lines[i + 1..end];
        if seen.contains(&key) {
            return Err(line.error(format!("`{key}` appears twice")));
        }
        seen.push(key);
        match key {
            "name" => {
                out.name = scalar_value(line, value, block)?;
                if out.name.contains('\n') {
                    return Err(line.error("`name` must be one line"));
                }
            }
            "description" => out.description = scalar_value(line, value, block)?,
            "requires" => out.requires = requires(line, value, block)?,
            _ => {}
        }
        i = end;
    }
    let missing = |key: &str| ParseError {
        line: None,
        message: format!("the front matter has no `{key}`"),
    };
    if out.name.is_empty() {
        return Err(missing("name"));
    }
    if out.description.is_empty() {
        return Err(missing("description"));
    }
    Ok(out)
}

/// The index after the block starting at `start`: blank lines and lines where `inside` holds.
fn block_end(lines: &[Line<'_>], start: usize, inside: impl Fn(&Line<'_>) -> bool) -> usize {
    let mut end = start;
    while end < lines.len() && (lines[end].is_blank() || inside(&lines[end])) {
        end += 1;
    }
    // Trailing blank lines belong to no block.
    while end > start && lines[end - 1].is_blank() {
        end -= 1;
    }
    end
}

/// Splits `key: value` (or `key:` with an empty value).
fn split_key<'a>(line: &Line<'a>) -> Result<(&'a str, &'a str), ParseError> {
    let text = line.text;
    let (key, value) = match text.find(": ") {
        Some(at) => (&text[..at], &text[at + 2..]),
        None => match text.strip_suffix(':') {
            Some(key) => (key, ""),
            None => return Err(line.error("expected `key: value`")),
        },
    };
    let key = key.trim_end();
    if key.is_empty() || key.starts_with('-') {
        return Err(line.error("expected `key: value`"));
    }
    Ok((key, value.trim()))
}

/// True when `value` is nothing but maybe a comment.
fn is_empty_value(value: &str) -> bool {
    let value = value.trim();
    value.is_empty() || value.starts_with('#')
}

/// A scalar: inline, continued on indented lines, or a `>` / `|` block.
fn scalar_value(line: &Line<'_>, value: &str, block: &[Line<'_>]) -> Result<String, ParseError> {
    let indicator = value.split_whitespace().next().unwrap_or("");
    let text = if matches!(indicator, ">" | ">-" | ">+" | "|" | "|-" | "|+") {
        block_scalar(indicator.starts_with('>'), block)
    } else {
        let mut joined = value.to_string();
        for l in block.iter().filter(|l| !l.is_skippable()) {
            joined.push(' ');
            joined.push_str(l.text);
        }
        scalar(&joined).map_err(|e| line.error(e))?
    };
    Ok(text.trim().to_string())
}

/// The text of a `>` (folded: lines joined with spaces, a blank line is a line break) or `|`
/// (literal) block.
fn block_scalar(folded: bool, block: &[Line<'_>]) -> String {
    let indent = block.iter().find(|l| !l.is_blank()).map_or(0, |l| l.indent);
    let lines = block.iter().map(|l| {
        if l.is_blank() {
            String::new()
        } else {
            format!("{}{}", " ".repeat(l.indent.saturating_sub(indent)), l.text)
        }
    });
    if !folded {
        return lines.collect::<Vec<_>>().join("\n");
    }
    let mut out = String::new();
    for line in lines {
        if line.is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(&line);
        }
    }
    out
}

/// One scalar written on one line: plain (a ` #` comment ends it), double or single quoted.
fn scalar(text: &str) -> Result<String, String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('"') {
        let (value, after) = double_quoted(rest)?;
        trailing(after)?;
        Ok(value)
    } else if let Some(rest) = text.strip_prefix('\'') {
        let (value, after) = single_quoted(rest)?;
        trailing(after)?;
        Ok(value)
    } else {
        Ok(strip_comment(text).trim().to_string())
    }
}

/// `text` up to a `#` that starts it or follows white space.
fn strip_comment(text: &str) -> &str {
    let mut previous_space = true;
    for (at, c) in text.char_indices() {
        if c == '#' && previous_space {
            return &text[..at];
        }
        previous_space = c.is_whitespace();
    }
    text
}

/// After a closing quote or bracket only a comment may follow.
fn trailing(after: &str) -> Result<(), String> {
    let rest = after.trim();
    if rest.is_empty() || (after.starts_with(char::is_whitespace) && rest.starts_with('#')) {
        Ok(())
    } else {
        Err(format!("unexpected text after the value: {rest:?}"))
    }
}

/// A double-quoted string after its opening quote: the value and what follows the closing quote.
fn double_quoted(text: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &text[at + 1..])),
            '\\' => {
                let (_, escaped) = chars.next().ok_or("unclosed double quote")?;
                out.push(match escaped {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    ' ' => ' ',
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    'u' => {
                        let hex: String =
                            (0..4).filter_map(|_| chars.next()).map(|x| x.1).collect();
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == 4)
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("bad escape \\u{hex}"))?
                    }
                    other => return Err(format!("unknown escape \\{other}")),
                });
            }
            c => out.push(c),
        }
    }
    Err("unclosed double quote".into())
}

/// A single-quoted string after its opening quote (`''` is one quote).
fn single_quoted(text: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\'' {
            out.push(c);
        } else if chars.peek().is_some_and(|&(_, next)| next == '\'') {
            chars.next();
            out.push('\'');
        } else {
            return Ok((out, &text[at + 1..]));
        }
    }
    Err("unclosed single quote".into())
}

/// A `[a, "b", 'c']` list.
fn flow_list(text: &str) -> Result<Vec<String>, String> {
    let mut rest = text
        .trim_start()
        .strip_prefix('[')
        .ok_or("expected a [list]")?;
    let mut items = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(']') {
            trailing(after)?;
            return Ok(items);
        }
        let (item, after) = if let Some(r) = rest.strip_prefix('"') {
            double_quoted(r)?
        } else if let Some(r) = rest.strip_prefix('\'') {
            single_quoted(r)?
        } else {
            let end = rest.find([',', ']']).ok_or("the list has no closing ]")?;
            (rest[..end].trim().to_string(), &rest[end..])
        };
        if item.trim().is_empty() {
            return Err("empty list item".into());
        }
        items.push(item);
        rest = after.trim_start();
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with(']') {
            return Err("expected `,` or `]` in the list".into());
        }
    }
}

/// The `requires:` block.
fn requires(line: &Line<'_>, value: &str, block: &[Line<'_>]) -> Result<Requires, ParseError> {
    let mut out = Requires::default();
    if !is_empty_value(value) {
        return if strip_comment(value).trim() == "{}" {
            Ok(out)
        } else {
            Err(line.error(
                "write `requires:` as an indented block, one requirement (bins, env, config, os) a line",
            ))
        };
    }
    let Some(indent) = block.iter().find(|l| !l.is_skippable()).map(|l| l.indent) else {
        return Ok(out);
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < block.len() {
        let l = &block[i];
        if l.is_skippable() {
            i += 1;
            continue;
        }
        if l.indent != indent {
            return Err(l.error("inconsistent indentation under `requires:`"));
        }
        let (key, value) = split_key(l)?;
        let mut end = block_end(block, i + 1, |x| {
            x.indent > indent || (x.indent == indent && is_item(x.text))
        });
        // A multi-line `[...]` may close at the key's indentation.
        if value.starts_with('[') && block.get(end).is_some_and(|x| x.text.starts_with(']')) {
            end += 1;
        }
        let items = list_value(l, value, &block[i + 1..end])?;
        if seen.contains(&key) {
            return Err(l.error(format!("`requires.{key}` appears twice")));
        }
        seen.push(key);
        match key {
            "bins" => out.bins = items,
            "env" => out.env = items,
            "config" => out.config = items,
            "os" => {
                if let Some(bad) = items.iter().find(|os| !OS_NAMES.contains(&os.as_str())) {
                    return Err(l.error(format!(
                        "unknown os `{bad}` (expected linux, macos or windows)"
                    )));
                }
                out.os = items;
            }
            other => {
                return Err(l.error(format!(
                    "unknown requirement `{other}` (expected bins, env, config or os)"
                )));
            }
        }
        i = end;
    }
    Ok(out)
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// A list written inline (`[a, b]` or one value) or as `- item` lines.
fn list_value(line: &Line<'_>, value: &str, block: &[Line<'_>]) -> Result<Vec<String>, ParseError> {
    if !is_empty_value(value) {
        if value.starts_with('[') {
            let mut joined = value.to_string();
            for l in block.iter().filter(|l| !l.is_skippable()) {
                joined.push(' ');
                joined.push_str(l.text);
            }
            return flow_list(&joined).map_err(|e| line.error(e));
        }
        if let Some(extra) = block.iter().find(|l| !l.is_skippable()) {
            return Err(extra.error("unexpected line after a single value"));
        }
        let item = scalar(value).map_err(|e| line.error(e))?;
        return Ok(vec![item]);
    }
    let mut items = Vec::new();
    for l in block.iter().filter(|l| !l.is_skippable()) {
        let Some(rest) = l.text.strip_prefix('-').filter(|_| is_item(l.text)) else {
            return Err(l.error("expected a `- item` line"));
        };
        let item = scalar(rest).map_err(|e| l.error(e))?;
        if item.trim().is_empty() {
            return Err(l.error("empty list item"));
        }
        items.push(item);
    }
    Ok(items)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
