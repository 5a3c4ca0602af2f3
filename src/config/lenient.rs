//! Values read as a newcomer writes them: a key that takes a duration (`*_s`, `*_ms`) reads a
//! number in the key's unit or a string with a unit (`"500ms"`, `"2s"`, `"1m 30s"`,
//! humantime's grammar); a list of sender ids reads numbers as well as strings
//! (`allow_from = [12345]`, as Telegram and Discord show ids).

use std::fmt;

use serde::Deserializer;
use serde::de::{Error, SeqAccess, Unexpected, Visitor};

/// A duration key in seconds: `30` or `"30s"`, `"2m"` (a fraction of a second is refused).
pub fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Duration { millis: false })
}

/// A duration key in milliseconds: `500` or `"500ms"`, `"2s"`.
pub fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(Duration { millis: true })
}

/// A list of ids: strings, or numbers written as they are.
pub fn ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_seq(Ids)
}

struct Duration {
    millis: bool,
}

impl<'de> Visitor<'de> for Duration {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.millis {
            true => f.write_str("a number of milliseconds or a duration such as \"500ms\""),
            false => f.write_str("a number of seconds or a duration such as \"30s\""),
        }
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<u64, E> {
        let refused = || E::invalid_value(Unexpected::Str(v), &self);
        let span = humantime::parse_duration(v.trim()).map_err(|_| refused())?;
        if self.millis {
            return u64::try_from(span.as_millis()).map_err(|_| refused());
        }
        if span.subsec_nanos() != 0 {
            return Err(E::invalid_value(
                Unexpected::Str(v),
                &"a whole number of seconds",
            ));
        }
        Ok(span.as_secs())
    }
}

struct Ids;

impl<'de> Visitor<'de> for Ids {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of ids (strings or numbers)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut ids = Vec::new();
        while let Some(id) = seq.next_element::<Id>()? {
            ids.push(id.0);
        }
        Ok(ids)
    }
}

/// One id of a list.
struct Id(String);

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        d.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an id (a string or a number)")
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Id, E> {
        Ok(Id(v.to_string()))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Id, E> {
        Ok(Id(v.to_string()))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Id, E> {
        Ok(Id(v.to_owned()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    struct Keys {
        #[serde(deserialize_with = "super::secs", default)]
        timeout_s: u64,
        #[serde(deserialize_with = "super::millis", default)]
        debounce_ms: u64,
        #[serde(deserialize_with = "super::ids", default)]
        allow_from: Vec<String>,
    }

    fn keys(text: &str) -> Result<Keys, String> {
        toml::from_str(text).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn durations_read_numbers_in_the_keys_unit_or_strings_with_a_unit() {
        assert_eq!(keys("timeout_s = 30").unwrap().timeout_s, 30);
        assert_eq!(keys("timeout_s = \"2m\"").unwrap().timeout_s, 120);
        assert_eq!(keys("debounce_ms = \"2s\"").unwrap().debounce_ms, 2000);
        assert_eq!(keys("debounce_ms = \"500ms\"").unwrap().debounce_ms, 500);
        let half = keys("timeout_s = \"500ms\"").unwrap_err();
        assert!(half.contains("a whole number of seconds"), "{half}");
        let bad = keys("timeout_s = \"soon\"").unwrap_err();
        assert!(bad.contains("a duration such as \"30s\""), "{bad}");
        assert!(keys("timeout_s = -1").is_err());
    }

    #[test]
    fn ids_read_numbers_and_strings() {
        let keys = keys("allow_from = [12345, \"@ann\", \"*\", -100200]").unwrap();
        assert_eq!(keys.allow_from, ["12345", "@ann", "*", "-100200"]);
    }
}
