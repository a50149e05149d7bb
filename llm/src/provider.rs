//! `Provider`: one OpenAI-compatible endpoint's configuration (URL, model, key, headers,
//! time-outs, retry policy, limits). Plain data with defaults; `Client::new` validates it.
//! Reading it from `rojos.toml` or the environment is the host's job.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::client::models::ModelListDialect;
use crate::history::EmptyContent;
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

/// When and how often a failed request is tried again. Retries happen only before anything
/// was yielded to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each time, with jitter.
    pub base_backoff: Duration,
    /// Upper bound of the computed backoff.
    pub max_backoff: Duration,
    /// Upper bound of a provider's `Retry-After` / `retry-after-ms`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

/// Size limits protecting memory from a runaway or hostile stream. Nothing of a response is
/// kept but what a turn is made of, so a turn holds memory in proportion to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest text plus tool calls (ids, names, arguments) of one turn, as assembled; a
    /// larger turn fails with [`LlmError::TooLarge`](crate::LlmError::TooLarge). Also sets
    /// [`Limits::max_event_bytes`].
    pub max_turn_bytes: usize,
    /// Largest `arguments` text of one tool call; a larger call gets an error result (the
    /// turn goes on). Meant to be at most `max_turn_bytes`.
    pub max_argument_bytes: usize,
    /// Most bytes read from one response, SSE or JSON. They are not kept (see
    /// `max_event_bytes`): this bounds the work of one turn, e.g. a stream of empty chunks.
    pub max_response_bytes: usize,
    /// How much of an HTTP error body is read to find the provider's message.
    pub max_error_body_bytes: usize,
}

impl Limits {
    /// The largest SSE line, event data or JSON answer: twice `max_turn_bytes` plus 64 KiB.
    ///
    /// A turn's text and arguments arrive JSON-escaped inside events, and escaping about
    /// doubles text at worst in practice (`"` `\` and newlines become two bytes; a character
    /// sent as `\uXXXX` takes six bytes for its two or three); the 64 KiB hold a chunk's own
    /// fields (ids, model, usage, Gemini's thought signatures). An event past this cap can
    /// only belong to a turn past `max_turn_bytes`, so it is refused before it is buffered.
    pub fn max_event_bytes(&self) -> usize {
        self.max_turn_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turn_bytes: 2 * 1024 * 1024,
            max_argument_bytes: 1024 * 1024 + 64 * 1024,
            max_response_bytes: 64 * 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
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
            .field("base_url", &crate::redact::display_url(&self.base_url))
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
