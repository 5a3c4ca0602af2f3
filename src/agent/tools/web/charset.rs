//! The text of a fetched body in its declared character set: the `Content-Type` header's
//! `charset`, else an HTML page's `<meta charset>` (or `http-equiv` content type) near its
//! start, else UTF-8; a byte-order mark wins over both (the WHATWG rule `encoding_rs` follows).

use encoding_rs::{Encoding, UTF_8};

/// How far into an HTML page a `<meta>` naming its charset is looked for.
const META_WINDOW: usize = 1024;

/// `bytes` decoded by the charset `content_type` or (for HTML) the page declares; bytes the
/// charset cannot map become U+FFFD.
pub fn decode(bytes: &[u8], content_type: Option<&str>, html: bool) -> String {
    let label = content_type
        .and_then(charset_param)
        .or_else(|| html.then(|| meta_charset(bytes)).flatten());
    let encoding = label
        .and_then(|l| Encoding::for_label(l.as_bytes()))
        .unwrap_or(UTF_8);
    let (text, _, _) = encoding.decode(bytes);
    text.into_owned()
}

/// The `charset` parameter of a `Content-Type` value.
fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
    })
}

/// The charset a `<meta charset=...>` or `<meta ... content="...; charset=...">` near the
/// start of an HTML page names.
fn meta_charset(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(META_WINDOW)];
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let at = head.find("charset=")?;
    let value = head[at + "charset=".len()..].trim_start_matches(['"', '\'', ' ']);
    let end = value
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')))
        .unwrap_or(value.len());
    head[..at]
        .rfind("<meta")
        .map(|_| value[..end].to_owned())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_charset_decodes_latin1_and_shift_jis() {
        let latin1 = b"Gr\xfc\xdfe aus K\xf6ln";
        assert_eq!(
            decode(latin1, Some("text/plain; charset=ISO-8859-1"), false),
            "Grüße aus Köln"
        );
        let sjis = b"\x93\xfa\x96\x7b";
        assert_eq!(
            decode(sjis, Some("text/html; charset=\"Shift_JIS\""), true),
            "日本"
        );
    }

    #[test]
    fn an_html_meta_charset_is_read_when_the_header_names_none() {
        let page = b"<html><head><meta charset=\"windows-1252\"></head><body>\x93hi\x94</body>";
        assert!(decode(page, Some("text/html"), true).contains("\u{201c}hi\u{201d}"));
        let equiv =
            b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\">\xf0\xd2\xc9";
        assert!(decode(equiv, None, true).ends_with("При"));
        // Plain text is not searched for a meta tag.
        assert!(decode(b"charset=koi8-r <meta \xf0", None, false).ends_with('\u{fffd}'));
    }

    #[test]
    fn utf8_is_the_default_and_unknown_labels_fall_back_to_it() {
        assert_eq!(decode("Grüße".as_bytes(), None, true), "Grüße");
        assert_eq!(
            decode("Grüße".as_bytes(), Some("text/html; charset=klingon"), true),
            "Grüße"
        );
        // A byte-order mark wins over the label.
        let bom = [&[0xef, 0xbb, 0xbf][..], "ü".as_bytes()].concat();
        assert_eq!(decode(&bom, Some("text/plain; charset=latin1"), false), "ü");
    }
}
