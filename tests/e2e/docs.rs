//! The book and the README: every link between their pages reaches a page and a heading that
//! exist (as mdBook names headings), no page of the book links out of `docs/` (mdBook would
//! not carry the target), and the configuration reference lists exactly the keys of
//! `config.example.toml`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// mdBook's id of a heading: lower case, letters, digits, `-` and `_` kept, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The ids of the headings of the Markdown file at `path`.
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    prose(&text)
        .into_iter()
        .filter_map(|(_, line)| {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| line[hashes..].strip_prefix(' '))
                .flatten()
                .map(slug)
        })
        .collect()
}

/// The targets of the Markdown links `[text](target)` on `line`.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .filter(|target| !target.contains(' '))
        .collect()
}

/// What is wrong with the links of `page` (relative to the repository), one line each.
fn broken_links(page: &str) -> Vec<String> {
    let path = root().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let in_book = page.starts_with("docs/");
    let folder = path.parent().unwrap().to_path_buf();
    let mut broken = Vec::new();
    for (n, line) in prose(&text) {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let linked = match file {
                "" => path.clone(),
                file => folder.join(file),
            };
            let linked = normalize(&linked);
            if in_book && !linked.starts_with(root().join("docs")) {
                broken.push(format!("{page}:{n}: {target} leaves the book"));
            } else if !linked.exists() {
                broken.push(format!("{page}:{n}: {target}: no such file"));
            } else if !anchor.is_empty()
                && linked.extension().is_some_and(|e| e == "md")
                && !anchors(&linked).contains(anchor)
            {
                broken.push(format!("{page}:{n}: {target}: no such heading"));
            }
        }
    }
    broken
}

/// `path` with its `..` and `.` parts resolved (the file may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            part => out.push(part),
        }
    }
    out
}

#[test]
fn every_link_of_the_readme_and_the_book_reaches_a_page_and_heading() {
    let mut pages = vec!["README.md".to_owned(), "ARCHITECTURE.md".to_owned()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    assert!(pages.len() > 20, "{pages:?}");
    let broken: Vec<String> = pages.iter().flat_map(|p| broken_links(p)).collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let listed: BTreeSet<&str> = summary.lines().flat_map(link_targets).collect();
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(
                listed.contains(name.as_str()),
                "{name} is not in SUMMARY.md"
            );
        }
    }
}

/// `table.key` for every `key = value` line of the example config, its commented examples of
/// optional tables (`# [[agents]]`, `# id = ...`) included.
fn example_keys() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("config.example.toml")).unwrap();
    let mut table = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        if line.starts_with('[') {
            let header = line.split_whitespace().next().unwrap();
            table = header.trim_matches(|c| c == '[' || c == ']').to_owned();
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let is_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if is_key && !table.is_empty() {
            keys.insert(format!("{table}.{key}"));
        }
    }
    keys
}

/// `table.key` for every row of the configuration reference: a `` | `key` | `` row under a
/// ``## `[table]` `` heading.
fn reference_keys() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/config-reference.md")).unwrap();
    let mut table = String::new();
    let mut keys = BTreeSet::new();
    for (_, line) in prose(&text) {
        if let Some(heading) = line.strip_prefix("## ") {
            table = heading
                .trim_matches(|c| c == '`' || c == '[' || c == ']')
                .to_owned();
        } else if let Some(row) = line.strip_prefix("| `") {
            let key = row.split('`').next().unwrap();
            keys.insert(format!("{table}.{key}"));
        }
    }
    keys
}

#[test]
fn the_configuration_reference_documents_exactly_the_example_configs_keys() {
    let example = example_keys();
    let reference = reference_keys();
    assert!(example.len() > 150, "{}", example.len());
    let undocumented: Vec<_> = example.difference(&reference).collect();
    let unknown: Vec<_> = reference.difference(&example).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "in config.example.toml, not in docs/config-reference.md: {undocumented:?}\n\
         in docs/config-reference.md, not in config.example.toml: {unknown:?}"
    );
}
