//! The overview's section on the nodes of a cluster: each node's health, heartbeat, leases
//! and the sessions running there (from the `status` report's `nodes`).

use serde_json::Value;

use super::html::{esc, query_value, table};

/// The "Nodes" section of the overview; empty when the gateway is not part of a cluster.
pub(super) fn section(status: &Value) -> String {
    let Some(nodes) = status["nodes"].as_array().filter(|n| !n.is_empty()) else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = nodes.iter().map(row).collect();
    let head = [
        "node",
        "state",
        "last heartbeat",
        "partitions",
        "intakes",
        "running",
    ];
    format!("<h2>Nodes</h2>{}", table(&head, &rows))
}

/// One node's row.
fn row(node: &Value) -> Vec<String> {
    let strings = |field: &str| -> Vec<String> {
        (node[field].as_array().into_iter().flatten())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let state = match node["connected"].as_bool().unwrap_or(false) {
        true => "<span class=ok>up</span>",
        false => "<span class=problem>down</span>",
    };
    let ago = node["lastSeenAgoMs"].as_u64().unwrap_or(0) as f64 / 1000.0;
    let partitions = node["partitions"].as_array().map_or(0, Vec::len);
    let runs: Vec<String> = strings("runs")
        .iter()
        .map(|key| {
            format!(
                "<a href=\"/panel/live?session={}\">{}</a>",
                query_value(key),
                esc(key)
            )
        })
        .collect();
    vec![
        esc(node["id"].as_str().unwrap_or_default()),
        state.to_owned(),
        format!("{ago:.1} s ago"),
        partitions.to_string(),
        esc(&strings("intakes").join(", ")),
        runs.join("<br>"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_node_is_listed_with_its_health_and_runs() {
        let status = serde_json::json!({"nodes": [
            {"id": "n0", "connected": true, "lastSeenAgoMs": 1500, "partitions": [1, 2],
             "intakes": ["intake:telegram"], "runs": ["agent:main:a<b"]},
            {"id": "n1", "connected": false, "lastSeenAgoMs": 12000, "partitions": [],
             "intakes": [], "runs": []},
        ]});
        let html = section(&status);
        assert!(html.starts_with("<h2>Nodes</h2>"), "{html}");
        assert!(
            html.contains("n0") && html.contains("<span class=ok>up</span>"),
            "{html}"
        );
        assert!(html.contains("<span class=problem>down</span>"), "{html}");
        assert!(
            html.contains("1.5 s ago") && html.contains("intake:telegram"),
            "{html}"
        );
        assert!(html.contains("agent:main:a&lt;b"), "{html}");
        assert!(section(&serde_json::json!({"nodes": []})).is_empty());
    }
}
