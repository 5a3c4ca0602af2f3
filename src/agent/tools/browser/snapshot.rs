//! The page as the model reads it: Chromium's accessibility tree (`Accessibility.
//! getFullAXTree`) as an indented outline, one line per meaningful node (`- link "Docs"
//! [ref=e3]`), where every node the agent can act on carries a reference that `click` and
//! `type` take. References name the node's `backendDOMNodeId` and last until the next
//! snapshot.

use std::collections::HashMap;

use serde_json::Value;

/// Roles the agent can click or type into: these get a reference.
const ACTIONABLE: &[&str] = &[
    "link",
    "button",
    "textbox",
    "searchbox",
    "combobox",
    "checkbox",
    "radio",
    "switch",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "option",
    "slider",
    "spinbutton",
    "listbox",
    "treeitem",
    "textField",
    "TextField",
];
/// Roles that only group others: their children are shown one level up.
const TRANSPARENT: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "group",
];

/// An outline of the page and its references.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The outline, one node per line.
    pub text: String,
    /// Reference (`e3`) -> `backendDOMNodeId`.
    pub refs: HashMap<String, i64>,
}

/// The outline of `nodes` (the `nodes` of `getFullAXTree`, as JSON), at most `max_chars`
/// characters (the rest is cut, and the outline says so).
pub fn outline(nodes: &[Value], max_chars: usize) -> Snapshot {
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
        .collect();
    let Some(root) = nodes
        .iter()
        .find(|n| n["parentId"].is_null())
        .or_else(|| nodes.first())
    else {
        return Snapshot::default();
    };
    let mut walk = Walk {
        by_id: &by_id,
        out: Snapshot::default(),
        max_chars,
        cut: false,
    };
    walk.node(root, 0, 0);
    if walk.cut {
        walk.out
            .text
            .push_str("… (cut: the page is longer; use `text` or scroll by clicking)\n");
    }
    walk.out
}

struct Walk<'a> {
    by_id: &'a HashMap<&'a str, &'a Value>,
    out: Snapshot,
    max_chars: usize,
    cut: bool,
}

impl Walk<'_> {
    fn node(&mut self, node: &Value, depth: usize, guard: usize) {
        if self.cut || guard > 200 {
            return;
        }
        let role = node["role"]["value"].as_str().unwrap_or_default();
        let name = node["name"]["value"].as_str().unwrap_or_default().trim();
        let shown = node["ignored"] != true
            && !TRANSPARENT.contains(&role)
            && !(role == "StaticText" && name.is_empty());
        let mut child_depth = depth;
        if shown && !(role == "RootWebArea" && depth == 0) {
            self.line(node, role, name, depth);
            child_depth = depth + 1;
        }
        let children: Vec<&Value> = node["childIds"]
            .as_array()
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| self.by_id.get(id.as_str()?).copied())
                    .collect()
            })
            .unwrap_or_default();
        for child in children {
            self.node(child, child_depth, guard + 1);
        }
    }

    fn line(&mut self, node: &Value, role: &str, name: &str, depth: usize) {
        let mut line = format!("{}- {role}", "  ".repeat(depth.min(20)));
        if !name.is_empty() {
            let name: String = name.chars().take(200).collect();
            line.push_str(&format!(" {name:?}"));
        }
        if let Some(value) = node["value"]["value"].as_str().filter(|v| !v.is_empty()) {
            let value: String = value.chars().take(200).collect();
            line.push_str(&format!(" = {value:?}"));
        }
        if ACTIONABLE.contains(&role)
            && let Some(backend) = node["backendDOMNodeId"].as_i64()
        {
            let reference = format!("e{}", self.out.refs.len() + 1);
            line.push_str(&format!(" [ref={reference}]"));
            self.out.refs.insert(reference, backend);
        }
        line.push('\n');
        if self.out.text.len() + line.len() > self.max_chars {
            self.cut = true;
            return;
        }
        self.out.text.push_str(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(
        id: &str,
        parent: Option<&str>,
        role: &str,
        name: &str,
        children: &[&str],
        backend: i64,
    ) -> Value {
        json!({"nodeId": id, "parentId": parent, "ignored": false, "role": {"value": role},
               "name": {"value": name}, "childIds": children, "backendDOMNodeId": backend})
    }

    #[test]
    fn actionable_nodes_get_references_and_wrappers_disappear() {
        let nodes = vec![
            node("1", None, "RootWebArea", "Test page", &["2"], 1),
            node("2", Some("1"), "generic", "", &["3", "4", "6"], 2),
            node("3", Some("2"), "heading", "Welcome", &[], 3),
            node("4", Some("2"), "link", "Docs", &["5"], 4),
            node("5", Some("4"), "StaticText", "Docs", &[], 5),
            node("6", Some("2"), "textbox", "Search", &[], 6),
        ];
        let snapshot = outline(&nodes, 10_000);
        assert_eq!(
            snapshot.text,
            "- heading \"Welcome\"\n- link \"Docs\" [ref=e1]\n  - StaticText \"Docs\"\n- textbox \"Search\" [ref=e2]\n"
        );
        assert_eq!(snapshot.refs["e1"], 4);
        assert_eq!(snapshot.refs["e2"], 6);
    }

    #[test]
    fn a_long_page_is_cut_and_says_so() {
        let mut nodes = vec![node("0", None, "RootWebArea", "", &[], 0)];
        let ids: Vec<String> = (1..200).map(|i| i.to_string()).collect();
        nodes[0]["childIds"] = json!(ids);
        for id in &ids {
            nodes.push(node(id, Some("0"), "paragraph", "some words here", &[], 1));
        }
        let snapshot = outline(&nodes, 300);
        assert!(snapshot.text.len() < 400);
        assert!(
            snapshot.text.ends_with("scroll by clicking)\n"),
            "{}",
            snapshot.text
        );
        assert_eq!(outline(&[], 100), Snapshot::default());
    }
}
