//! The crate's top-level modules form layers that only point down: a file of module A may name
//! `crate::B` only when B is listed below A in `LAYERS` (tests excluded). This is the check
//! behind the module map in `src/lib.rs` and `ARCHITECTURE.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// Top to bottom.
const LAYERS: &[&str] = &[
    "gateway", "rpc", "inbound", "reply", "lane", "acp", "agent", "sandbox", "store", "config",
    "domain",
];

/// `text` without `#[cfg(test)]` items (brace-matched, as `layers.py` does).
fn strip_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (Some(open), semi) = (after.find('{'), after.find(';')) else {
            return out;
        };
        if semi.is_some_and(|s| s < open) {
            rest = &after[semi.unwrap_or(0) + 1..];
            continue;
        }
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every `crate::<name>` a text names.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = text[at + 7..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            names.insert(name);
        }
    }
    names
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn top_level_modules_only_use_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (rank, layer) in LAYERS.iter().enumerate() {
        let mut files = Vec::new();
        let dir = src.join(layer);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        files.push(src.join(format!("{layer}.rs")));
        for file in files.iter().filter(|f| f.is_file()) {
            let name = file.file_name().unwrap().to_string_lossy();
            if name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let text = strip_tests(&std::fs::read_to_string(file).unwrap());
            for used in named_modules(&text) {
                let Some(used_rank) = LAYERS.iter().position(|l| *l == used) else {
                    continue;
                };
                if used_rank < rank {
                    violations.push(format!("{}: {layer} -> {used}", file.display()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "upward edges:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"));
    let lib = lib.unwrap();
    for line in lib.lines().filter(|l| l.starts_with("pub mod ")) {
        let name = line.trim_start_matches("pub mod ").trim_end_matches(';');
        assert!(
            LAYERS.contains(&name),
            "module {name} is in no layer of tests/layers.rs"
        );
    }
}

#[test]
fn the_check_sees_an_upward_edge() {
    let text = "use crate::gateway::Core;\n#[cfg(test)]\nmod tests { use crate::rpc::X; }\n";
    let names = named_modules(&strip_tests(text));
    assert_eq!(names, BTreeSet::from(["gateway".to_string()]));
}
