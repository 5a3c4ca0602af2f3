//! What a build without an optional part (a cargo feature off) says of a setting that asks
//! for it (docs/development.md, "Features").

/// Why a setting asking for `part` is refused by a build without the cargo `feature`.
pub fn not_built(part: &str, feature: &str) -> String {
    format!(
        "needs {part}, which this chela was built without: build it with the cargo feature \
         `{feature}` (`--features {feature}`)"
    )
}
