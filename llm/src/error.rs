//! `LlmError`: every way a model turn can fail, named for what the caller can do about it.
//! Messages are lowercase, name the provider by host (never the URL's path, query or the
//! API key) and chain under `{:#}`. Retry decisions live in `retry.rs`, not here.

use std::time::Duration;

/// The source of a transport failure, kept for the `{:#}` chain and logs.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a model turn failed.
///
/// `provider` fields hold the endpoint's `host[:port]`, enough to tell the user which
/// provider failed without leaking paths, queries or keys.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider could not be reached (DNS, refused, TLS, connect timeout), after retries.
    #[error("could not reach the model provider at {provider}")]
    Connect {
        /// The endpoint's host.
        provider: String,
        /// What the HTTP client reported.
        #[source]
        source: BoxError,
    },

    /// The provider answered with an HTTP error status (after retries where they apply).
    #[error("the model provider at {provider} answered HTTP {code}: {message}")]
    Status {
        /// The endpoint's host.
        provider: String,
        /// The HTTP status code.
        code: u16,
        /// The provider's own error message, or the start of its body.
        message: String,
        /// The error's `code`, `type` and `status` as the provider sent them
        /// (`context_length_exceeded`, `invalid_request_error`, `NOT_FOUND`), for [`LlmError::fault`].
        codes: Vec<String>,
    },

    /// The provider reported an error inside a `200` stream (`{"error":…}`,
    /// `{"object":"error",…}`, `event: error` or `finish_reason: "error"`).
    #[error("the model provider at {provider} reported an error: {message}")]
    Provider {
        /// The endpoint's host.
        provider: String,
        /// The provider's message.
        message: String,
        /// The provider's error code or type, when it gave one (`api_error`, `overloaded_error`…).
        code: Option<String>,
    },

    /// The stream ended (EOF or a broken connection) before `[DONE]` or a finish reason.
    /// Text already yielded stays valid as a partial answer; no tool call may run.
    #[error("the stream from the model provider at {provider} ended before the turn was complete")]
    StreamCut {
        /// The endpoint's host.
        provider: String,
        /// The transport error, when the connection broke rather than ended.
        #[source]
        source: Option<BoxError>,
    },

    /// No data event arrived for the idle timeout (keep-alive comments do not count).
    #[error("the model provider at {provider} sent no data for {}s", .after.as_secs_f64())]
    IdleTimeout {
        /// The endpoint's host.
        provider: String,
        /// The configured idle timeout.
        after: Duration,
    },

    /// The whole turn, retries included, took longer than its deadline.
    #[error("the model turn with the provider at {provider} took longer than {}s", .after.as_secs_f64())]
    TurnTimeout {
        /// The endpoint's host.
        provider: String,
        /// The configured per-turn deadline.
        after: Duration,
    },

    /// The provider sent something that is not a Chat Completions stream.
    #[error("the model provider at {provider} sent a malformed stream: {detail}")]
    Malformed {
        /// The endpoint's host.
        provider: String,
        /// What was wrong.
        detail: String,
    },

    /// The stream ended (`[DONE]`, EOF or a JSON answer) with no text, no tool call and no
    /// finish reason: never an empty success.
    #[error("the model provider at {provider} ended the turn without text, tool calls or a finish reason (received {received})")]
    EmptyTurn {
        /// The endpoint's host.
        provider: String,
        /// What was received instead ("3 chunks with no choices, then [DONE]").
        received: String,
    },

    /// The turn ended with `finish_reason: "length"` before any text or tool call: the model
    /// hit its token limit (usually a full context window) before answering.
    #[error("the model at {provider} reached its token limit (finish_reason \"length\") before any text or tool call")]
    LengthBeforeOutput {
        /// The endpoint's host.
        provider: String,
    },

    /// The turn, or one piece of the stream, passed a size limit; nothing past the limit was
    /// kept and the connection was dropped. Text already yielded stays valid as partial output.
    #[error("{}", too_large_message(provider, limit))]
    TooLarge {
        /// The endpoint's host.
        provider: String,
        /// Which limit, and its value.
        limit: SizeLimit,
    },

    /// The request cannot be sent as given (an invalid tool name, an unserialisable message).
    #[error("invalid model request: {detail}")]
    InvalidRequest {
        /// What was wrong.
        detail: String,
    },

    /// The provider configuration is unusable (bad base URL, bad header).
    #[error("invalid provider configuration: {detail}")]
    InvalidConfig {
        /// What was wrong.
        detail: String,
    },
}

impl LlmError {
    /// The HTTP status, for [`LlmError::Status`].
    pub fn status_code(&self) -> Option<u16> {
        match self {
            LlmError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The provider's own message, for [`LlmError::Status`] and [`LlmError::Provider`].
    pub fn provider_message(&self) -> Option<&str> {
        match self {
            LlmError::Status { message, .. } | LlmError::Provider { message, .. } => Some(message),
            _ => None,
        }
    }

    /// Every value [`LlmError::kind`] gives, in the order of the variants: the `kind` labels
    /// of `rojos_provider_errors_total` (`docs/api.md`, "GET /metrics").
    pub const KINDS: &'static [&'static str] = &[
        "connect",
        "status",
        "provider",
        "stream_cut",
        "idle_timeout",
        "turn_timeout",
        "malformed",
        "empty_turn",
        "length_before_output",
        "too_large",
        "invalid_request",
        "invalid_config",
    ];

    /// A short, stable name for the variant (`connect`, `status`, `stream_cut`…), for
    /// metrics labels and logs; one of [`LlmError::KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Connect { .. } => "connect",
            LlmError::Status { .. } => "status",
            LlmError::Provider { .. } => "provider",
            LlmError::StreamCut { .. } => "stream_cut",
            LlmError::IdleTimeout { .. } => "idle_timeout",
            LlmError::TurnTimeout { .. } => "turn_timeout",
            LlmError::Malformed { .. } => "malformed",
            LlmError::EmptyTurn { .. } => "empty_turn",
            LlmError::LengthBeforeOutput { .. } => "length_before_output",
            LlmError::TooLarge { .. } => "too_large",
            LlmError::InvalidRequest { .. } => "invalid_request",
            LlmError::InvalidConfig { .. } => "invalid_config",
        }
    }
}

/// The size limit a stream passed (see [`crate::Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeLimit {
    /// The turn's text and tool calls, as assembled, passed `max_turn_bytes`.
    Turn {
        /// `Limits::max_turn_bytes`.
        max_bytes: usize,
    },
    /// One SSE line, one event's data, or a whole JSON answer passed
    /// [`crate::Limits::max_event_bytes`], which is derived from the turn limit.
    Event {
        /// The event cap.
        max_bytes: usize,
        /// `Limits::max_turn_bytes`, the limit the cap follows from.
        max_turn_bytes: usize,
    },
    /// The response body passed `max_response_bytes`.
    Response {
        /// `Limits::max_response_bytes`.
        max_bytes: usize,
    },
}

/// What to tell the user: the turn limit first (the one they can act on), then the detail.
fn too_large_message(provider: &str, limit: &SizeLimit) -> String {
    const ADVICE: &str =
        "ask for a shorter answer or for the work in smaller steps, or raise the limit";
    match limit {
        SizeLimit::Turn { max_bytes } => {
            format!("the model's turn exceeded {max_bytes} bytes of text and tool calls; {ADVICE}")
        }
        SizeLimit::Event {
            max_bytes,
            max_turn_bytes,
        } => format!(
            "the model's turn exceeded {max_turn_bytes} bytes: the provider at {provider} sent \
             one stream event over {max_bytes} bytes; {ADVICE}"
        ),
        SizeLimit::Response { max_bytes } => format!(
            "the model provider at {provider} sent more than {max_bytes} bytes for one turn"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each variant, in the order of the variants. The match makes a new
    /// variant fail to compile here until it has a sample (and so a place in `KINDS`).
    fn one_of_each() -> Vec<LlmError> {
        let provider = || "h".to_owned();
        let samples = vec![
            LlmError::Connect {
                provider: provider(),
                source: "refused".into(),
            },
            LlmError::Status {
                provider: provider(),
                code: 500,
                message: String::new(),
                codes: Vec::new(),
            },
            LlmError::Provider {
                provider: provider(),
                message: String::new(),
                code: None,
            },
            LlmError::StreamCut {
                provider: provider(),
                source: None,
            },
            LlmError::IdleTimeout {
                provider: provider(),
                after: Duration::from_secs(1),
            },
            LlmError::TurnTimeout {
                provider: provider(),
                after: Duration::from_secs(1),
            },
            LlmError::Malformed {
                provider: provider(),
                detail: String::new(),
            },
            LlmError::EmptyTurn {
                provider: provider(),
                received: String::new(),
            },
            LlmError::LengthBeforeOutput {
                provider: provider(),
            },
            LlmError::TooLarge {
                provider: provider(),
                limit: SizeLimit::Turn { max_bytes: 1 },
            },
            LlmError::InvalidRequest {
                detail: String::new(),
            },
            LlmError::InvalidConfig {
                detail: String::new(),
            },
        ];
        for sample in &samples {
            match sample {
                LlmError::Connect { .. }
                | LlmError::Status { .. }
                | LlmError::Provider { .. }
                | LlmError::StreamCut { .. }
                | LlmError::IdleTimeout { .. }
                | LlmError::TurnTimeout { .. }
                | LlmError::Malformed { .. }
                | LlmError::EmptyTurn { .. }
                | LlmError::LengthBeforeOutput { .. }
                | LlmError::TooLarge { .. }
                | LlmError::InvalidRequest { .. }
                | LlmError::InvalidConfig { .. } => {}
            }
        }
        samples
    }

    #[test]
    fn kinds_lists_every_kind_once() {
        let kinds: Vec<&str> = one_of_each().iter().map(LlmError::kind).collect();
        assert_eq!(kinds, LlmError::KINDS);
    }

    #[test]
    fn only_answers_and_in_stream_errors_carry_the_provider_s_own_message() {
        let status = LlmError::Status {
            provider: "h".into(),
            code: 400,
            message: "bad tools".into(),
            codes: Vec::new(),
        };
        assert_eq!(status.provider_message(), Some("bad tools"));
        let in_stream = LlmError::Provider {
            provider: "h".into(),
            message: "overloaded".into(),
            code: None,
        };
        assert_eq!(in_stream.provider_message(), Some("overloaded"));
        let cut = LlmError::StreamCut {
            provider: "h".into(),
            source: None,
        };
        assert_eq!(cut.provider_message(), None);
    }

    #[test]
    fn messages_are_lowercase_and_name_the_host() {
        let e = LlmError::Status {
            provider: "api.example.com".into(),
            code: 429,
            message: "rate limited".into(),
            codes: Vec::new(),
        };
        assert_eq!(
            e.to_string(),
            "the model provider at api.example.com answered HTTP 429: rate limited"
        );
        let e = LlmError::IdleTimeout {
            provider: "127.0.0.1:11434".into(),
            after: Duration::from_millis(1500),
        };
        assert_eq!(
            e.to_string(),
            "the model provider at 127.0.0.1:11434 sent no data for 1.5s"
        );
        let e = LlmError::StreamCut {
            provider: "h".into(),
            source: None,
        };
        assert_eq!(
            e.to_string(),
            "the stream from the model provider at h ended before the turn was complete"
        );
    }

    #[test]
    fn too_large_says_which_limit_and_what_to_do() {
        let turn = LlmError::TooLarge {
            provider: "h".into(),
            limit: SizeLimit::Turn { max_bytes: 8192 },
        };
        assert_eq!(
            turn.to_string(),
            "the model's turn exceeded 8192 bytes of text and tool calls; ask for a shorter \
             answer or for the work in smaller steps, or raise the limit"
        );
        assert_eq!(turn.kind(), "too_large");
        let event = LlmError::TooLarge {
            provider: "h:1".into(),
            limit: SizeLimit::Event {
                max_bytes: 4_259_840,
                max_turn_bytes: 2_097_152,
            },
        };
        assert_eq!(
            event.to_string(),
            "the model's turn exceeded 2097152 bytes: the provider at h:1 sent one stream event \
             over 4259840 bytes; ask for a shorter answer or for the work in smaller steps, or \
             raise the limit"
        );
    }
}
