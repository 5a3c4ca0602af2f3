//! `named_enum!`: config enums with their names, `Display` and a case-insensitive `FromStr`.

/// Display / FromStr by the names used in config and `/queue` (case-insensitive parsing).
macro_rules! named_enum {
    ($ty:ident, $what:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// The config name of this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = ParseEnumError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let wanted = s.trim();
                $(if wanted.eq_ignore_ascii_case($name) {
                    return Ok($ty::$variant);
                })+
                Err(ParseEnumError {
                    what: $what,
                    value: s.to_owned(),
                    expected: &[$($name),+],
                })
            }
        }
    };
}
