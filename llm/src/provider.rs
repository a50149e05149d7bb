//! `Provider`: one OpenAI-compatible endpoint's configuration (URL, model, key, headers,
//! time-outs, retry policy, limits). Plain data with defaults; `Client::new` validates it.
//! Reading it from `rojos.toml` or the environment is the host's job.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::dialect::ModelListDialect;
use crate::history::EmptyContent;
use crate::limits::Limits;
use crate::retry::RetryPolicy;
use crate::secret::Secret;

/// Time limits for one model turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP + TLS connect limit per attempt.
    pub connect: Duration,
    /// Longest wait for the response headers or the next data event. Keep-alive comments
    /// do not reset it. Local models processing a long prompt need a generous value.
    pub idle: Duration,
    /// Deadline for the whole turn, retries and backoff included.
    pub turn: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            idle: Duration::from_secs(180),
            turn: Duration::from_secs(600),
        }
    }
}

/// One OpenAI-compatible Chat Completions endpoint and how to talk to it.
///
/// Build with [`Provider::new`] and adjust the public fields.
#[derive(Clone)]
#[non_exhaustive]
pub struct Provider {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1/`;
    /// `/chat/completions` is appended (without a double slash, keeping any query).
    pub base_url: String,
    /// The `model` field of every request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<Secret>,
    /// Extra request headers (e.g. OpenRouter's `HTTP-Referer`). Values are treated as secret.
    pub headers: Vec<(String, String)>,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Size limits.
    pub limits: Limits,
    /// How an assistant message without text is stored: `null` (OpenAI) or `""` (Gemini).
    pub empty_content: EmptyContent,
    /// Ask for a usage chunk (`stream_options.include_usage`); off by default because some
    /// OpenAI-compatible servers reject unknown request fields.
    pub include_usage: bool,
    /// How its model list differs from OpenAI's (set by
    /// [`ProviderKind::apply_quirks`](crate::ProviderKind::apply_quirks)).
    pub model_list: ModelListDialect,
    /// Extra top-level request fields (`temperature`, `max_tokens`, …); they never override
    /// `model`, `messages`, `stream`, `tools` or `tool_choice`.
    pub extra_body: Map<String, Value>,
}

impl Provider {
    /// A provider with default time-outs, retries and limits.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Provider {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            limits: Limits::default(),
            empty_content: EmptyContent::Null,
            include_usage: false,
            model_list: ModelListDialect::OpenAi,
            extra_body: Map::new(),
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(Secret::new(key));
        self
    }
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Provider")
            .field("base_url", &crate::endpoint::display_url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("retry", &self.retry)
            .field("limits", &self.limits)
            .field("empty_content", &self.empty_content)
            .field("include_usage", &self.include_usage)
            .field("model_list", &self.model_list)
            .field("extra_body", &self.extra_body)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key_or_header_values() {
        let mut p = Provider::new("http://h/v1?key=url-secret", "m").with_api_key("sk-secret-123");
        p.headers.push(("x-api-key".into(), "also-secret".into()));
        let shown = format!("{p:?}");
        assert!(!shown.contains("sk-secret-123"), "{shown}");
        assert!(!shown.contains("also-secret"), "{shown}");
        assert!(!shown.contains("url-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(shown.contains("x-api-key"));
    }
}
