//! `[log]`: where `chela gateway` writes its log lines besides stderr (docs/operating.md).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A file `chela gateway` appends its log lines to, besides stderr (mode 0600); empty:
    /// stderr only. Relative to the config file's folder.
    pub file: PathBuf,
    /// The size in MiB at which the file is rotated (`file` -> `file.1` -> `file.2` ...).
    pub max_mb: u64,
    /// How many rotated files are kept (0: the file is emptied when full).
    pub keep: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            file: PathBuf::new(),
            max_mb: 10,
            keep: 5,
        }
    }
}

impl LogConfig {
    /// The log file, when one is set.
    pub fn path(&self) -> Option<&std::path::Path> {
        (!self.file.as_os_str().is_empty()).then_some(self.file.as_path())
    }

    /// The rotation size in bytes (at least 1 MiB).
    pub fn max_bytes(&self) -> u64 {
        self.max_mb.max(1).saturating_mul(1 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_file_by_default_and_a_floor_on_the_size() {
        let mut config = LogConfig::default();
        assert_eq!(config.path(), None);
        config.file = "chela.log".into();
        assert_eq!(config.path(), Some(std::path::Path::new("chela.log")));
        config.max_mb = 0;
        assert_eq!(config.max_bytes(), 1 << 20);
    }
}
