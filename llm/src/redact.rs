//! Keeping a provider's secrets out of text we show: a base URL may carry a key in its query
//! (Gemini's `?key=…`) or its user-info (`https://user:pass@host`), and a provider's error
//! body may echo the key it was sent. [`display_url`] shows a URL without them;
//! [`Secrets`] replaces the key, header values and URL secrets in a provider's messages.

use reqwest::Url;

use crate::error::LlmError;
use crate::provider::Provider;

/// What stands for a hidden value.
const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not searched for: scrubbing `a` would garble messages, and
/// no key is this short.
const MIN_SCRUBBED_CHARS: usize = 4;

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

/// A provider's secret values, to be replaced wherever a provider's answer echoes them.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} values)", self.0.len())
    }
}

impl Secrets {
    /// The API key, every extra header's value, and the user-info and query values of the
    /// base URL (as written and percent-decoded).
    pub(crate) fn of(provider: &Provider) -> Secrets {
        let mut values: Vec<String> = provider
            .api_key
            .iter()
            .map(|k| k.expose().to_owned())
            .chain(provider.headers.iter().map(|(_, v)| v.clone()))
            .collect();
        if let Ok(url) = Url::parse(provider.base_url.trim()) {
            values.push(url.username().to_owned());
            values.extend(url.password().map(str::to_owned));
            values.extend(
                url.query()
                    .into_iter()
                    .flat_map(|q| q.split('&'))
                    .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_owned())),
            );
            values.extend(url.query_pairs().map(|(_, v)| v.into_owned()));
        }
        values.retain(|v| v.chars().count() >= MIN_SCRUBBED_CHARS);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Secrets(values)
    }

    /// `text` with every secret replaced by `<redacted>`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.0.iter().fold(text.to_owned(), |shown, secret| {
            shown.replace(secret, REDACTED)
        })
    }

    /// `error` with the provider's own words (its message, a malformed stream's detail)
    /// scrubbed.
    pub(crate) fn scrub_error(&self, error: LlmError) -> LlmError {
        if self.0.is_empty() {
            return error;
        }
        match error {
            LlmError::Status {
                provider,
                code,
                message,
                codes,
            } => LlmError::Status {
                provider,
                code,
                message: self.scrub(&message),
                codes: codes.iter().map(|c| self.scrub(c)).collect(),
            },
            LlmError::Provider {
                provider,
                message,
                code,
            } => LlmError::Provider {
                provider,
                message: self.scrub(&message),
                code: code.map(|c| self.scrub(&c)),
            },
            LlmError::Malformed { provider, detail } => LlmError::Malformed {
                provider,
                detail: self.scrub(&detail),
            },
            other => other,
        }
    }
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

    #[test]
    fn a_providers_secrets_are_scrubbed_from_its_messages() {
        let mut provider =
            Provider::new("https://h/v1?key=AIza%2Bsecret&x=ab", "m").with_api_key("sk-live-123");
        provider
            .headers
            .push(("x-api-key".into(), "hdr-secret".into()));
        let secrets = Secrets::of(&provider);
        let error = secrets.scrub_error(LlmError::Status {
            provider: "h".into(),
            code: 400,
            message: "bad key sk-live-123 (sent hdr-secret, url key AIza+secret, AIza%2Bsecret) ab"
                .into(),
            codes: Vec::new(),
        });
        assert_eq!(
            error.to_string(),
            "the model provider at h answered HTTP 400: bad key <redacted> (sent <redacted>, \
             url key <redacted>, <redacted>) ab"
        );
        assert!(!format!("{secrets:?}").contains("sk-live"));
    }
}
