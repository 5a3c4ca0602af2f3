//! The imported settings laid over an existing config (`chela import openclaw --force`):
//! every setting the import writes replaces the existing one, and every other setting
//! (`[store]`, `[rpc]`, keys of a table the import also writes) is kept as it was.

use toml::{Table, Value};

/// `imported` laid over `existing`: tables are merged key by key, anything else (values,
/// arrays such as `[[agents]]`) is replaced whole.
pub fn merge(mut existing: Table, imported: Table) -> Table {
    for (key, value) in imported {
        match (existing.get_mut(&key), value) {
            (Some(Value::Table(old)), Value::Table(new)) => {
                let old = std::mem::take(old);
                existing.insert(key, Value::Table(merge(old, new)));
            }
            (_, value) => {
                existing.insert(key, value);
            }
        }
    }
    existing
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn settings_the_import_does_not_write_are_kept() {
        let existing: Table = toml::from_str(
            "[store]\npath = \"/srv/chela\"\n[rpc]\nlisten = \"127.0.0.1:1\"\n\
             [queue]\ncap = 3\ndrop = \"old\"\n[[agents]]\nid = \"mine\"\n",
        )
        .unwrap();
        let imported: Table =
            toml::from_str("[queue]\ncap = 10\n[[agents]]\nid = \"ops\"\n").unwrap();
        let merged = merge(existing, imported);
        assert_eq!(merged["store"]["path"].as_str(), Some("/srv/chela"));
        assert_eq!(merged["rpc"]["listen"].as_str(), Some("127.0.0.1:1"));
        assert_eq!(merged["queue"]["cap"].as_integer(), Some(10));
        assert_eq!(merged["queue"]["drop"].as_str(), Some("old"));
        let agents = merged["agents"].as_array().unwrap();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0]["id"].as_str(), Some("ops"));
    }
}
