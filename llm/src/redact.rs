//! Keeping a provider's secrets out of text we show: a base URL may carry a key in its query
//! (Gemini's `?key=…`) or its user-info (`https://user:pass@host`), and a provider's error
//! body may echo the key it was sent. [`display_url`](crate::display_url) (`endpoint.rs`)
//! shows a URL without them; [`Secrets`] replaces the key, header values and URL secrets in a provider's messages.

use reqwest::Url;

use crate::endpoint::REDACTED;
use crate::error::LlmError;
use crate::provider::Provider;

/// Secrets shorter than this are not searched for: scrubbing `a` would garble messages, and
/// no key is this short.
const MIN_SCRUBBED_CHARS: usize = 4;

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
