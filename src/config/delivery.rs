//! `[delivery]`: the outbox worker that delivers final replies (docs/durability.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default `[delivery] ttl`.
pub const DEFAULT_DELIVERY_TTL: Duration = Duration::from_secs(10 * 60);

/// `[delivery]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// How long a final reply is worth delivering, as a duration (`"10m"`, `"90s"`); an
    /// older undelivered reply goes to the dead letters.
    pub ttl: String,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            ttl: "10m".to_owned(),
        }
    }
}

impl DeliveryConfig {
    /// The TTL; the default when it does not parse (see [`DeliveryConfig::check`]).
    pub fn ttl(&self) -> Duration {
        humantime::parse_duration(self.ttl.trim()).unwrap_or(DEFAULT_DELIVERY_TTL)
    }

    /// Checks the table: `Err((key, message))` names the key at fault.
    pub fn check(&self) -> Result<(), (String, String)> {
        match humantime::parse_duration(self.ttl.trim()) {
            Ok(ttl) if !ttl.is_zero() => Ok(()),
            Ok(_) => Err(("delivery.ttl".to_owned(), "must be more than 0".to_owned())),
            Err(e) => Err((
                "delivery.ttl".to_owned(),
                format!(
                    "{:?} is not a duration like \"10m\" or \"90s\": {e}",
                    self.ttl
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_parses_humantime_and_refuses_nonsense() {
        let mut config = DeliveryConfig::default();
        assert_eq!(config.ttl(), DEFAULT_DELIVERY_TTL);
        config.ttl = "90s".into();
        assert_eq!(config.ttl(), Duration::from_secs(90));
        assert!(config.check().is_ok());
        config.ttl = "soon".into();
        assert_eq!(
            config.check().map_err(|(key, _)| key),
            Err("delivery.ttl".into())
        );
        config.ttl = "0s".into();
        assert!(config.check().is_err());
    }
}
