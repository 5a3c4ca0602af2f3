//! HTML helpers: escaping and the page frame. Everything shown that came from outside (chat
//! text, names, keys, config values) goes through [`esc`].

use std::fmt::Write as _;

use super::super::methods::Role;

/// `text` escaped for HTML text and quoted attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for a query value.
pub(super) fn query_value(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The pages of the menu: path and label.
const MENU: [(&str, &str); 7] = [
    ("/panel", "Overview"),
    ("/panel/sessions", "Sessions"),
    ("/panel/live", "Live runs"),
    ("/panel/pairing", "Pairing"),
    ("/panel/bindings", "Bindings"),
    ("/panel/dead", "Dead letters"),
    ("/panel/config", "Config"),
];

/// What a page frame needs to know about the viewer.
pub(super) struct Viewer<'a> {
    /// What the login allows.
    pub(super) role: Role,
    /// The login's CSRF token (put in every form and in a meta tag for scripts).
    pub(super) csrf: &'a str,
}

impl Viewer<'_> {
    /// A hidden CSRF field for a form.
    pub(super) fn csrf_field(&self) -> String {
        format!("<input type=hidden name=csrf value=\"{}\">", esc(self.csrf))
    }

    /// A one-button POST form to `action` with hidden `fields`; disabled for a client login
    /// when `operator_only`.
    pub(super) fn button(
        &self,
        action: &str,
        fields: &[(&str, &str)],
        label: &str,
        operator_only: bool,
    ) -> String {
        let mut out = format!(
            "<form class=inline method=post action=\"{}\">{}",
            esc(action),
            self.csrf_field()
        );
        for (name, value) in fields {
            let _ = write!(
                out,
                "<input type=hidden name=\"{}\" value=\"{}\">",
                esc(name),
                esc(value)
            );
        }
        let disabled = match operator_only && self.role == Role::Client {
            true => " disabled title=\"needs the operator token\"",
            false => "",
        };
        let _ = write!(out, "<button{disabled}>{}</button></form>", esc(label));
        out
    }
}

/// A whole page: menu, title, `body` (already HTML).
pub(super) fn page(viewer: &Viewer<'_>, title: &str, body: &str) -> String {
    let mut nav = String::new();
    for (path, label) in MENU {
        let _ = write!(nav, "<a href=\"{path}\">{label}</a>");
    }
    let role = match viewer.role {
        Role::Operator => "operator",
        Role::Client => "client (read-only)",
    };
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width,initial-scale=1\">\
<meta name=csrf content=\"{csrf}\"><title>chela · {title}</title>\
<link rel=stylesheet href=\"/panel/assets/panel.css\"><script src=\"/panel/assets/panel.js\" defer></script>\
</head><body><header><strong>chela</strong><nav>{nav}</nav><span class=role>{role}</span>\
<form class=inline method=post action=\"/panel/logout\">{field}<button>Log out</button></form></header>\
<main><h1>{title}</h1>{body}</main></body></html>",
        csrf = esc(viewer.csrf),
        title = esc(title),
        field = viewer.csrf_field(),
    )
}

/// The login page, with `problem` shown above the form when set.
pub(super) fn login(problem: Option<&str>) -> String {
    let problem = problem
        .map(|p| format!("<p class=problem>{}</p>", esc(p)))
        .unwrap_or_default();
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width,initial-scale=1\"><title>chela · log in</title>\
<link rel=stylesheet href=\"/panel/assets/panel.css\"></head><body><main class=login>\
<h1>chela control panel</h1>{problem}<form method=post action=\"/panel/login\">\
<label>Token <input id=token type=password name=token autocomplete=current-password required autofocus></label>\
<button id=login>Log in</button></form>\
<p class=hint>The operator token (every action) is in <code>&lt;store.path&gt;.rpc</code> beside the store, \
made at each start; the client token (<code>[rpc] token</code>) opens the read-only pages.</p>\
</main></body></html>"
    )
}

/// A table with `head` cells and `rows` (cells already HTML).
pub(super) fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return "<p class=empty>None.</p>".to_owned();
    }
    let mut out = String::from("<div class=scroll><table><thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub(super) fn time(ms: u64) -> String {
    match jiff::Timestamp::from_millisecond(ms as i64) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn a_client_sees_operator_buttons_disabled() {
        let client = Viewer {
            role: Role::Client,
            csrf: "c",
        };
        let b = client.button("/panel/x", &[("k", "<v>")], "Go", true);
        assert!(b.contains("disabled") && b.contains("&lt;v&gt;"), "{b}");
        assert!(
            !client
                .button("/panel/x", &[], "Go", false)
                .contains("disabled")
        );
        let operator = Viewer {
            role: Role::Operator,
            csrf: "c",
        };
        assert!(
            !operator
                .button("/panel/x", &[], "Go", true)
                .contains("disabled")
        );
    }
}
