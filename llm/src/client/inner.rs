//! [`Inner`]: what every request of a [`Client`](super::Client) is sent with (the provider,
//! its HTTP client, the endpoint, the headers with the key, the secrets to scrub), and the
//! time limits of one wait for the provider.

use reqwest::header::HeaderMap;
use reqwest::Url;
use tokio::time::Instant;

use crate::error::LlmError;
use crate::provider::Provider;
use crate::redact::Secrets;

/// One provider's connection settings, shared by a client's clones and its turns.
pub(super) struct Inner {
    pub(super) provider: Provider,
    pub(super) http: reqwest::Client,
    pub(super) url: Url,
    /// `host[:port]`, the provider's name in errors and logs.
    pub(super) label: String,
    pub(super) headers: HeaderMap,
    /// Scrubbed from the provider's own words before they reach an error or a log.
    pub(super) secrets: Secrets,
}

impl Inner {
    /// How long to wait for the provider's next sign of life.
    pub(super) fn wait_limit(&self, deadline: Instant) -> Instant {
        (Instant::now() + self.provider.timeouts.idle).min(deadline)
    }

    /// The turn's or the idle time-out, whichever passed.
    pub(super) fn timeout_error(&self, deadline: Instant) -> LlmError {
        let timeouts = &self.provider.timeouts;
        if Instant::now() >= deadline {
            LlmError::TurnTimeout {
                provider: self.label.clone(),
                after: timeouts.turn,
            }
        } else {
            LlmError::IdleTimeout {
                provider: self.label.clone(),
                after: timeouts.idle,
            }
        }
    }
}
