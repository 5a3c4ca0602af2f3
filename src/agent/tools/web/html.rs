//! HTML to readable Markdown or text for `web_fetch`: parsed with html5ever (through `htmd`),
//! noise removed from the tree (scripts, styles, navigation, forms, elements marked hidden,
//! and blocks whose class or id says ad, cookie, share, related...), the main content picked
//! (`<main>` or `role=main`, then its dominant `<article>`), and that converted by `htmd`.

use std::rc::Rc;

use htmd::element_handler::Handlers;
use htmd::options::{BulletListMarker, Options};
use htmd::{Element, HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;

pub use super::nesting::nesting_estimate;

/// How `web_fetch` renders a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown: headings, lists, links, code blocks, tables.
    Markdown,
    /// The same layout without link targets and images.
    Text,
}

/// A converted page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The document's `<title>`, when it has one.
    pub title: Option<String>,
    /// The main content, converted.
    pub text: String,
}

/// Elements dropped with everything inside them.
const NOISE_TAGS: &[&str] = &[
    "script", "style", "noscript", "template", "nav", "footer", "aside", "form", "iframe", "svg",
    "canvas", "button", "select", "input", "textarea", "dialog", "object", "embed", "link", "meta",
];

/// `role` values of page furniture.
const NOISE_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "dialog",
    "alert",
];

/// Words in a class or id that mark a block as not being the content.
const NOISE_WORDS: &[&str] = &[
    "ad",
    "ads",
    "advert",
    "advertisement",
    "adslot",
    "sponsor",
    "sponsored",
    "promo",
    "cookie",
    "cookies",
    "consent",
    "newsletter",
    "subscribe",
    "share",
    "sharing",
    "social",
    "related",
    "recommended",
    "comments",
    "sidebar",
    "breadcrumb",
    "breadcrumbs",
    "popup",
    "modal",
    "paywall",
    "outbrain",
    "taboola",
    "headerlink",
];

/// Elements never dropped for their class or id (the content often sits in them).
const KEEP_TAGS: &[&str] = &["html", "head", "body", "main", "article"];

/// Deeper nesting than this is not walked recursively (the converter recurses): the text is
/// gathered flat instead.
const MAX_DEPTH: usize = 400;

/// A page whose tags (by [`nesting_estimate`]) nest deeper than this is not parsed: the
/// parser's work grows with the square of the depth, so a page of 2 MB of `<div>`s would take
/// a core for hours.
const MAX_PARSE_DEPTH: usize = 1000;

/// Converts an HTML document.
pub fn convert(html: &str, format: Format) -> Page {
    let estimate = nesting_estimate(html);
    if estimate > MAX_PARSE_DEPTH {
        return Page {
            title: None,
            text: format!(
                "(not converted: the page nests its elements about {estimate} deep, more \
                 than {MAX_PARSE_DEPTH})"
            ),
        };
    }
    let converter = converter(format);
    let Ok(tree) = converter.html_to_tree(html) else {
        return Page {
            title: None,
            text: String::new(),
        };
    };
    let title = find_first(&tree, "title").map(|t| squeeze(&text_of(&t)));
    let depth = prune(&tree);
    let scope = main_content(&tree);
    let text = if depth > MAX_DEPTH {
        squeeze_lines(&text_of(&scope))
    } else {
        tidy(&converter.tree_to_markdown(&scope))
    };
    Page {
        title: title.filter(|t| !t.is_empty()),
        text,
    }
}

/// The text of an HTML fragment (a search snippet with `<strong>` and entities), squeezed.
pub fn plain_text(fragment: &str) -> String {
    if !fragment.contains(['<', '&']) {
        return squeeze(fragment);
    }
    match converter(Format::Text).html_to_tree(fragment) {
        Ok(tree) => squeeze(&text_of(&tree)),
        Err(_) => squeeze(fragment),
    }
}

fn converter(format: Format) -> HtmlToMarkdown {
    let options = Options {
        bullet_list_marker: BulletListMarker::Dash,
        ul_bullet_spacing: 1,
        ol_number_spacing: 1,
        ..Options::default()
    };
    let builder = HtmlToMarkdown::builder()
        .options(options)
        .skip_tags(NOISE_TAGS.to_vec());
    match format {
        Format::Markdown => builder.build(),
        Format::Text => builder
            .skip_tags(vec!["img", "picture", "video", "audio"])
            .add_handler(vec!["a"], |h: &dyn Handlers, el: Element| {
                Some(h.walk_children(el.node))
            })
            .build(),
    }
}

/// The element's tag name, `None` for other nodes.
fn tag(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

/// The value of attribute `name`.
fn attr(node: &Node, name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == name)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

/// Whether an element is page furniture rather than content.
fn is_noise(node: &Node) -> bool {
    let Some(tag) = tag(node) else {
        return matches!(node.data, NodeData::Comment { .. });
    };
    if NOISE_TAGS.contains(&tag) {
        return true;
    }
    if KEEP_TAGS.contains(&tag) {
        return false;
    }
    if attr(node, "hidden").is_some() || attr(node, "aria-hidden").as_deref() == Some("true") {
        return true;
    }
    if attr(node, "role").is_some_and(|r| NOISE_ROLES.contains(&r.trim())) {
        return true;
    }
    ["class", "id"].iter().any(|name| {
        attr(node, name).is_some_and(|value| {
            value
                .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
                .any(|word| NOISE_WORDS.contains(&word.to_ascii_lowercase().as_str()))
        })
    })
}

/// Removes noise from the tree (without recursion); returns the deepest nesting seen.
fn prune(root: &Rc<Node>) -> usize {
    let mut stack = vec![(Rc::clone(root), 0usize)];
    let mut deepest = 0;
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        node.children.borrow_mut().retain(|child| !is_noise(child));
        for child in node.children.borrow().iter() {
            stack.push((Rc::clone(child), depth + 1));
        }
    }
    deepest
}

/// Every node under `root`, in document order (without recursion).
fn descendants(root: &Rc<Node>) -> Vec<Rc<Node>> {
    let mut out = Vec::new();
    let mut stack = vec![Rc::clone(root)];
    while let Some(node) = stack.pop() {
        for child in node.children.borrow().iter().rev() {
            stack.push(Rc::clone(child));
        }
        out.push(node);
    }
    out
}

fn find_first(root: &Rc<Node>, name: &str) -> Option<Rc<Node>> {
    descendants(root).into_iter().find(|n| tag(n) == Some(name))
}

/// The text under `root`, text nodes joined with spaces at block edges kept as newlines.
fn text_of(root: &Rc<Node>) -> String {
    let mut out = String::new();
    for node in descendants(root) {
        match &node.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            NodeData::Element { .. } if is_block(&node) => out.push('\n'),
            _ => {}
        }
    }
    out
}

fn is_block(node: &Node) -> bool {
    tag(node).is_some_and(|t| {
        matches!(
            t,
            "p" | "div"
                | "section"
                | "article"
                | "li"
                | "tr"
                | "br"
                | "pre"
                | "h1"
                | "h2"
                | "h3"
                | "h4"
                | "h5"
                | "h6"
                | "blockquote"
                | "table"
                | "ul"
                | "ol"
        )
    })
}

/// How much readable text is under `root` (whitespace not counted).
fn weight(root: &Rc<Node>) -> usize {
    descendants(root)
        .iter()
        .map(|n| match &n.data {
            NodeData::Text { contents } => contents
                .borrow()
                .chars()
                .filter(|c| !c.is_whitespace())
                .count(),
            _ => 0,
        })
        .sum()
}

/// The node holding the page's main content: `<main>` (or `role=main`) if there is one, and
/// within it the `<article>` that holds most of its text; else `<body>`.
fn main_content(tree: &Rc<Node>) -> Rc<Node> {
    let all = descendants(tree);
    let body = all
        .iter()
        .find(|n| tag(n) == Some("body"))
        .cloned()
        .unwrap_or_else(|| Rc::clone(tree));
    let body_weight = weight(&body);
    let big_enough = |n: &Rc<Node>, whole: usize| {
        let w = weight(n);
        w >= 200.min(whole) && w * 3 >= whole
    };
    let main = all
        .iter()
        .find(|n| tag(n) == Some("main") || attr(n, "role").as_deref() == Some("main"))
        .filter(|n| big_enough(n, body_weight))
        .cloned()
        .unwrap_or(body);
    let scope_weight = weight(&main);
    descendants(&main)
        .into_iter()
        .filter(|n| tag(n) == Some("article"))
        .max_by_key(weight)
        .filter(|a| big_enough(a, scope_weight))
        .unwrap_or(main)
}

/// Runs of whitespace as one space, trimmed.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Each line squeezed, blank lines collapsed.
fn squeeze_lines(text: &str) -> String {
    let lines: Vec<String> = text.lines().map(squeeze).collect();
    tidy(&lines.join("\n"))
}

/// Trailing spaces off each line, at most one blank line in a row, trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NEWS: &str = r#"<!doctype html><html><head><title> Storm  hits coast </title>
        <style>body{color:red}</style><script>var tracking = "SECRET-SCRIPT";</script></head>
        <body class="has-sidebar"><header><nav><a href="/">Home</a> <a href="/world">World</a></nav></header>
        <div class="ad-slot">BUY NOW cheap pills</div>
        <main><article><h1>Storm hits the coast</h1>
        <p>The storm reached the coast on <b>Tuesday</b>, said <a href="https://met.example/">the office</a>.</p>
        <p>Thousands of homes lost power overnight, and roads in the region were closed while crews worked to clear fallen trees.</p>
        <div class="share-buttons">Share on X</div>
        <p>Officials expect the weather to calm by Thursday, though more rain is forecast for the weekend.</p>
        </article>
        <aside><h2>Most read</h2><p>Celebrity gossip</p></aside></main>
        <div id="cookie-banner" role="dialog">We use cookies</div>
        <footer>© News Corp</footer></body></html>"#;

    #[test]
    fn an_article_keeps_its_text_and_drops_the_furniture() {
        let page = convert(NEWS, Format::Markdown);
        assert_eq!(page.title.as_deref(), Some("Storm hits coast"));
        let md = &page.text;
        assert!(md.starts_with("# Storm hits the coast"), "{md}");
        assert!(md.contains("on **Tuesday**"), "{md}");
        assert!(md.contains("[the office](https://met.example/)"), "{md}");
        assert!(md.contains("calm by Thursday"), "{md}");
        for noise in [
            "SECRET-SCRIPT",
            "color:red",
            "Home",
            "BUY NOW",
            "Share on X",
            "Most read",
            "cookies",
            "News Corp",
        ] {
            assert!(!md.contains(noise), "{noise} in {md}");
        }
    }

    #[test]
    fn text_format_drops_link_targets_and_images() {
        let html = r#"<body><p>See <a href="https://x.example/">the docs</a> <img src="a.png" alt="logo"> now.</p></body>"#;
        let text = convert(html, Format::Text).text;
        assert_eq!(text, "See the docs now.");
        let md = convert(html, Format::Markdown).text;
        assert!(md.contains("[the docs](https://x.example/)"), "{md}");
    }

    #[test]
    fn code_blocks_and_tables_survive() {
        let html = "<body><h2>Install</h2><pre><code class=\"language-sh\">cargo add chela\n\
                    cargo build</code></pre><table><tr><th>key</th><th>default</th></tr>\
                    <tr><td>timeout_s</td><td>30</td></tr></table></body>";
        let md = convert(html, Format::Markdown).text;
        assert!(
            md.contains("```sh\ncargo add chela\ncargo build\n```"),
            "{md}"
        );
        assert!(md.contains("| key "), "{md}");
        assert!(md.contains("| timeout\\_s | 30 "), "{md}");
    }

    #[test]
    fn a_page_without_main_or_article_uses_the_body() {
        let page = convert("<p>just text</p>", Format::Markdown);
        assert_eq!(page.title, None);
        assert_eq!(page.text, "just text");
    }

    #[test]
    fn nesting_is_estimated_without_parsing() {
        assert_eq!(
            nesting_estimate("<html><body><div><p>a<p>b</div><br/><img src=x></body>"),
            1
        );
        assert_eq!(
            nesting_estimate("<div><section><span/></section><a href='/'>x</a></div>"),
            3,
            "outside svg and math the parser ignores the slash: the span stays open"
        );
        assert_eq!(nesting_estimate("a < b and <3 and </> and <!-- c -->"), 0);
        let deep = format!("{}x", "<div>".repeat(200_000));
        assert_eq!(nesting_estimate(&deep), 200_000);
        let page = convert(&deep, Format::Markdown);
        assert!(
            page.text.starts_with("(not converted: the page nests"),
            "{}",
            page.text
        );
    }

    #[test]
    fn absurd_nesting_is_gathered_flat_without_recursion() {
        let depth = 900;
        let html = format!(
            "<body>{}deep text{}</body>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let page = convert(&html, Format::Markdown);
        assert_eq!(page.text, "deep text");
    }
}
