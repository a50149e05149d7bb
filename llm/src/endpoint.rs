//! How messages and logs name an endpoint: its `host[:port]` ([`endpoint_host`]), or its URL
//! with the user-info and query values hidden ([`display_url`]), since a base URL may carry a
//! key (Gemini's `?key=…`, `https://user:pass@host`).

use reqwest::Url;

/// What stands for a hidden value.
pub(crate) const REDACTED: &str = "<redacted>";

/// The `host[:port]` of an endpoint: how errors name the provider (never a path, query or
/// key).
pub fn endpoint_host(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => String::from("unknown host"),
    }
}

/// `url` as it may be shown in a message or a log: scheme, host, port and path, with the
/// user-info replaced by `<redacted>` and every query value by `<redacted>` (names kept).
/// Text that is not a URL is cut at its first `?` or `#` and before any `@`.
pub fn display_url(url: &str) -> String {
    let Ok(parsed) = Url::parse(url.trim()) else {
        let head = url.split(['?', '#']).next().unwrap_or("");
        let query = if head.len() < url.len() { "?…" } else { "" };
        let head = match head.split_once("://") {
            Some((scheme, rest)) => match rest.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://{REDACTED}@{host}"),
                None => head.to_owned(),
            },
            None => head.rsplit('@').next().unwrap_or("").to_owned(),
        };
        return format!("{head}{query}");
    };
    let mut shown = format!("{}://", parsed.scheme());
    if !parsed.username().is_empty() || parsed.password().is_some() {
        shown.push_str(REDACTED);
        shown.push('@');
    }
    shown.push_str(parsed.host_str().unwrap_or(""));
    if let Some(port) = parsed.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(parsed.path());
    let names: Vec<String> = parsed
        .query_pairs()
        .map(|(name, _)| format!("{name}={REDACTED}"))
        .collect();
    if !names.is_empty() {
        shown.push('?');
        shown.push_str(&names.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_query_values_or_user_info() {
        for (url, shown) in [
            (
                "https://generativelanguage.googleapis.com/v1beta/openai?key=AIzaSyXX-secret",
                "https://generativelanguage.googleapis.com/v1beta/openai?key=<redacted>",
            ),
            (
                "http://me:pa55word@127.0.0.1:8080/v1?a=1&key=k2",
                "http://<redacted>@127.0.0.1:8080/v1?a=<redacted>&key=<redacted>",
            ),
            ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
            // A user name alone, or a password alone, is user-info too.
            ("http://me@h/v1", "http://<redacted>@h/v1"),
            ("http://:pa55@h/v1", "http://<redacted>@h/v1"),
            ("not a url?key=AIzaSyXX-secret", "not a url?…"),
            ("ftp//me:pa55word@h/v1", "h/v1"),
            (
                "htp://me:pa55word@h/v1?key=x",
                "htp://<redacted>@h/v1?key=<redacted>",
            ),
        ] {
            assert_eq!(display_url(url), shown, "{url}");
        }
    }
}
