//! The crate's top-level modules form layers that only point down: a file of module A may name
//! `crate::B` only when B is listed below A in `LAYERS` (tests excluded). This is the check
//! behind the module map in `src/lib.rs` and `ARCHITECTURE.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// Top to bottom.
const LAYERS: &[&str] = &[
    "gateway",
    "rpc",
    "reach",
    "commands",
    "questions",
    "runner",
    "cron",
    "intake",
    "delivery",
    "cluster",
    "inbound",
    "reply",
    "lane",
    "acp",
    "agent",
    "mcp",
    "sandbox",
    "store",
    "config",
    "domain",
    "metrics",
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

/// The top-level modules of the crate whose sources are in `src` (files and folders, `lib.rs`
/// and `main.rs` left out) with the modules each one names through `crate::` (tests excluded).
fn module_graph(src: &Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let mut modules: std::collections::BTreeMap<String, Vec<std::path::PathBuf>> =
        Default::default();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if stem == "lib" || stem == "main" || stem == "bin" {
            continue;
        }
        let files = modules.entry(stem).or_default();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .into_iter()
        .map(|(module, files)| {
            let mut uses = BTreeSet::new();
            for file in files {
                let name = file.file_name().unwrap().to_string_lossy();
                if name == "tests.rs" || name.ends_with("_tests.rs") {
                    continue;
                }
                let text = strip_tests(&std::fs::read_to_string(&file).unwrap());
                uses.extend(
                    named_modules(&text)
                        .into_iter()
                        .filter(|u| *u != module && names.contains(u)),
                );
            }
            (module, uses)
        })
        .collect()
}

/// A cycle in `graph`, if there is one, as the modules on it.
fn find_cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_of_the_workspace_has_a_cycle_between_its_top_level_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = vec![root.join("src"), root.join("tests/kit/src")];
    for entry in std::fs::read_dir(root.join("channels")).unwrap() {
        crates.push(entry.unwrap().path().join("src"));
    }
    for src in crates.iter().filter(|s| s.is_dir()) {
        let cycle = find_cycle(&module_graph(src));
        assert!(cycle.is_none(), "{}: cycle {cycle:?}", src.display());
    }
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let graph = std::collections::BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
        ("c".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into()]));
    let acyclic = std::collections::BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(find_cycle(&acyclic), None);
}
