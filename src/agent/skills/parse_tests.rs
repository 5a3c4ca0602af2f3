//! The front-matter parser: the supported subset, errors with line numbers, and properties
//! (no panics on any text, name and description survive a round trip).

use proptest::prelude::*;

use super::*;

fn ok(text: &str) -> FrontMatter {
    parse(text).unwrap_or_else(|e| panic!("{e} in {text:?}"))
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(front) => panic!("parsed {front:?} from {text:?}"),
        Err(e) => e.to_string(),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn name_and_description() {
    let front = ok("---\nname: gh\ndescription: Work with GitHub: issues, PRs.\n---\n# Body\n");
    assert_eq!(front.name, "gh");
    assert_eq!(front.description, "Work with GitHub: issues, PRs.");
    assert_eq!(front.requires, Requires::default());
}

#[test]
fn the_bundled_skill_parses() {
    let front = ok(include_str!("../../../skills/coding-agent/SKILL.md"));
    assert_eq!(front.name, "coding-agent");
    assert!(front.description.starts_with("Hand larger coding work"));
}

#[test]
fn quoting_comments_and_continuation_lines() {
    let front = ok(concat!(
        "\u{feff}---\r\n",
        "# a comment\r\n",
        "name: \"say \\\"hi\\\" \\u00e9\"   # trailing comment\r\n",
        "description: 'it''s #1'\r\n",
        "license: MIT\r\n",
        "metadata:\r\n",
        "  anything: [goes, here\r\n",
        "---\r\n",
    ));
    assert_eq!(front.name, "say \"hi\" é");
    assert_eq!(front.description, "it's #1");

    let front = ok("---\nname: x # not part\ndescription: one\n  two\n\n  three\n---\n");
    assert_eq!(front.name, "x");
    assert_eq!(front.description, "one two three");
}

#[test]
fn block_scalars() {
    let front = ok("---\nname: x\ndescription: >\n  folded\n  text\n\n  para\n---\n");
    assert_eq!(front.description, "folded text\npara");
    let front = ok("---\nname: x\ndescription: |-\n  line one\n    indented\n\n  # kept\n---\n");
    assert_eq!(front.description, "line one\n  indented\n\n# kept");
}

#[test]
fn requirements_in_every_list_style() {
    let front = ok(concat!(
        "---\n",
        "name: gh\n",
        "description: GitHub\n",
        "requires:\n",
        "  bins: [gh, \"git\", 'jq']\n",
        "  env:\n",
        "    - GITHUB_TOKEN\n",
        "    # a comment\n",
        "    - \"GH_HOST\"\n",
        "  config:\n",
        "  - channels.telegram.token\n",
        "  os: linux\n",
        "---\n",
    ));
    assert_eq!(
        front.requires,
        Requires {
            bins: strings(&["gh", "git", "jq"]),
            env: strings(&["GITHUB_TOKEN", "GH_HOST"]),
            config: strings(&["channels.telegram.token"]),
            os: strings(&["linux"]),
        }
    );
    let front = ok("---\nname: a\ndescription: b\nrequires: {}\n---\n");
    assert_eq!(front.requires, Requires::default());
    let front =
        ok("---\nname: a\ndescription: b\nrequires:\n  bins: [\n    a,\n    b,\n  ]\n---\n");
    assert_eq!(front.requires.bins, strings(&["a", "b"]));
}

#[test]
fn errors_name_the_line() {
    let cases = [
        (
            "no front matter",
            "no front matter: SKILL.md must start with a `---` line",
        ),
        (
            "---\nname: a\n",
            "the front matter is not closed by a `---` line",
        ),
        (
            "---\nname: a\n---\n",
            "the front matter has no `description`",
        ),
        (
            "---\ndescription: a\n---\n",
            "the front matter has no `name`",
        ),
        (
            "---\nname: \"\"\ndescription: a\n---\n",
            "the front matter has no `name`",
        ),
        (
            "---\nname: a\njust text\n---\n",
            "line 3: expected `key: value`",
        ),
        (
            "---\nname: a\nname: b\n---\n",
            "line 3: `name` appears twice",
        ),
        ("---\n  name: a\n---\n", "line 2: unexpected indentation"),
        (
            "---\nname: a\n\tdescription: b\n---\n",
            "line 3: indent with spaces, not tabs",
        ),
        ("---\nname: \"a\n---\n", "line 2: unclosed double quote"),
        (
            "---\nname: 'a' b\n---\n",
            "line 2: unexpected text after the value: \"b\"",
        ),
        ("---\nname: \"\\q\"\n---\n", "line 2: unknown escape \\q"),
        (
            "---\nname: |\n  a\n  b\ndescription: c\n---\n",
            "line 2: `name` must be one line",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  bins: [gh\n---\n",
            "line 5: the list has no closing ]",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  bins: [gh,,]\n---\n",
            "line 5: empty list item",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  os: [darwin]\n---\n",
            "line 5: unknown os `darwin` (expected linux, macos or windows)",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  bin: gh\n---\n",
            "line 5: unknown requirement `bin` (expected bins, env, config or os)",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  bins:\n    gh\n---\n",
            "line 6: expected a `- item` line",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  bins:\n    -\n---\n",
            "line 6: empty list item",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n    bins: [a]\n  env: [b]\n---\n",
            "line 6: inconsistent indentation under `requires:`",
        ),
        (
            "---\nname: a\ndescription: b\nrequires: {bins: [a]}\n---\n",
            "line 4: write `requires:` as an indented block, one requirement (bins, env, config, os) a line",
        ),
        (
            "---\nname: a\ndescription: b\nrequires:\n  env: [A]\n  env: [B]\n---\n",
            "line 6: `requires.env` appears twice",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(err(text), expected, "for {text:?}");
    }
}

/// Writes `value` as a YAML scalar: plain when that reads back the same, else double-quoted.
fn render(value: &str, plain: bool) -> String {
    let plain_safe = !value.is_empty()
        && value.trim() == value
        && !value.starts_with(['"', '\'', '#', '>', '|', '['])
        && !value.contains(" #");
    if plain && plain_safe {
        return value.to_string();
    }
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn render_list(key: &str, items: &[String], flow: bool) -> String {
    if flow {
        let rendered: Vec<String> = items.iter().map(|i| render(i, true)).collect();
        format!("  {key}: [{}]\n", rendered.join(", "))
    } else {
        let mut out = format!("  {key}:\n");
        for item in items {
            out.push_str(&format!("    - {}\n", render(item, true)));
        }
        out
    }
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("---".to_string()),
        Just("name: x".to_string()),
        Just("description: d".to_string()),
        Just("requires:".to_string()),
        Just("  bins: [a, b".to_string()),
        Just("  - ".to_string()),
        Just("  env:".to_string()),
        Just("    - \"A\\".to_string()),
        Just("description: >".to_string()),
        Just("'".to_string()),
        "[ -~]{0,12}",
        "\\PC{0,8}",
    ]
}

proptest! {
    #[test]
    fn never_panics_on_any_text(text in "\\PC*") {
        let _ = parse(&text);
        let _ = parse(&format!("---\n{text}\n---\n"));
    }

    #[test]
    fn never_panics_on_near_front_matter(lines in proptest::collection::vec(fragment(), 0..12)) {
        let _ = parse(&format!("---\n{}\n---\n", lines.join("\n")));
        let _ = parse(&lines.join("\n"));
    }

    #[test]
    fn name_description_and_requirements_round_trip(
        name in "[a-z][a-z0-9-]{0,20}",
        description in "[ -~\u{e9}\u{4e2d}]{1,60}".prop_filter("not blank", |d| !d.trim().is_empty()),
        plain in any::<bool>(),
        bins in proptest::collection::vec("[a-z0-9_.-]{1,10}", 0..4),
        env in proptest::collection::vec("[A-Z_][A-Z0-9_]{0,10}", 0..3),
        flow in any::<bool>(),
        body in "\\PC{0,40}",
    ) {
        let mut text = format!("---\nname: {}\ndescription: {}\n", render(&name, plain), render(&description, plain));
        if !bins.is_empty() || !env.is_empty() {
            text.push_str("requires:\n");
            text.push_str(&render_list("bins", &bins, flow));
            text.push_str(&render_list("env", &env, !flow));
        }
        text.push_str(&format!("---\n{body}\n"));
        let front = parse(&text).map_err(|e| TestCaseError::fail(format!("{e} in {text:?}")))?;
        prop_assert_eq!(front.name, name);
        prop_assert_eq!(front.description, description.trim());
        prop_assert_eq!(front.requires.bins, bins);
        prop_assert_eq!(front.requires.env, env);
    }
}
