//! [`Fault`]: what kind of failure an [`LlmError`] is, as far as the user can act on it
//! (unreachable, key refused, unknown model, rate limited, out of credit, context too long…).
//! Read from the HTTP status, the provider's error code, type and message, each provider's
//! phrasing named where it is matched, and from a transport error's source chain. Wording
//! the sentence for the user is the caller's job; the error's `Display` stays the log's.

use std::error::Error;
use std::io::ErrorKind;

use crate::error::LlmError;
use crate::retry;

/// What kind of failure a model turn had, named for what the user can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Nothing answered at the provider's address.
    Unreachable(Reach),
    /// The provider refused the API key (401, or an authentication error in the body).
    KeyRefused,
    /// The key was accepted but the request is not allowed (403: permissions, region).
    Forbidden,
    /// The provider does not have the model asked for.
    UnknownModel,
    /// The model, or the server as started, cannot call tools.
    NoToolSupport,
    /// Nothing at the URL speaks Chat Completions (404 or 405 without a model message):
    /// probably a wrong `base_url`.
    NoEndpoint,
    /// Too many requests for now: waiting helps.
    RateLimited,
    /// The account is out of quota or credit: waiting does not help.
    OutOfCredit,
    /// The conversation does not fit the model's context window.
    ContextTooLong,
    /// The provider failed or is overloaded on its side (5xx, `overloaded_error`).
    ProviderDown,
    /// The answer broke off before its end.
    StreamCut,
    /// No data arrived for the idle time-out.
    IdleTimeout,
    /// The whole turn took longer than its deadline.
    TurnTimeout,
    /// The answer is not a Chat Completions stream (an HTML page, data that is not JSON):
    /// probably a wrong `base_url`.
    NotCompatible,
    /// The turn ended with no text, no tool call and no finish reason.
    EmptyTurn,
    /// The model reached its token limit before writing anything (`length`, nothing else).
    OutOfTokens,
    /// The turn passed one of Rojos's size limits.
    TooLarge,
    /// The request could not be built or sent as configured (Rojos's side).
    Request,
    /// Anything else: the provider's own message says what.
    Other,
}

/// Why a provider could not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reach {
    /// Nothing listens at the address (connection refused): a local server not started.
    Refused,
    /// The host name does not resolve (DNS).
    NameNotResolved,
    /// The TLS handshake failed (certificate, or https spoken to an http server).
    Tls,
    /// The connection was not accepted in time.
    TimedOut,
    /// Another transport failure.
    Other,
}

impl LlmError {
    /// What kind of failure this is, as far as the user can act on it (see [`Fault`]).
    pub fn fault(&self) -> Fault {
        classify(self)
    }
}

/// The fault of `error` (see [`LlmError::fault`]).
pub(crate) fn classify(error: &LlmError) -> Fault {
    match error {
        LlmError::Connect { source, .. } => Fault::Unreachable(reach(source.as_ref())),
        LlmError::Status {
            code,
            message,
            codes,
            ..
        } => from_answer(Some(*code), codes, message),
        LlmError::Provider { message, code, .. } => from_answer(None, code.as_slice(), message),
        LlmError::StreamCut { .. } => Fault::StreamCut,
        LlmError::IdleTimeout { .. } => Fault::IdleTimeout,
        LlmError::TurnTimeout { .. } => Fault::TurnTimeout,
        LlmError::Malformed { .. } => Fault::NotCompatible,
        LlmError::EmptyTurn { .. } => Fault::EmptyTurn,
        LlmError::LengthBeforeOutput { .. } => Fault::OutOfTokens,
        LlmError::TooLarge { .. } => Fault::TooLarge,
        LlmError::InvalidRequest { .. } | LlmError::InvalidConfig { .. } => Fault::Request,
    }
}

/// Walks the source chain: an I/O error's kind first, then what the HTTP client says.
fn reach(source: &(dyn Error + 'static)) -> Reach {
    let mut said = String::new();
    let mut timed_out = false;
    let mut next = Some(source);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return Reach::Refused,
                ErrorKind::TimedOut => return Reach::TimedOut,
                _ => {}
            }
        }
        if let Some(http) = error.downcast_ref::<reqwest::Error>() {
            timed_out |= http.is_timeout();
        }
        said.push_str(&error.to_string().to_ascii_lowercase());
        said.push('\n');
        next = error.source();
    }
    // hyper-util's resolver: "dns error: failed to lookup address information: …".
    if contains_any(&said, &["dns error", "failed to lookup address"]) {
        Reach::NameNotResolved
    // rustls: "invalid peer certificate: …", "received corrupt message" (http spoken back).
    } else if contains_any(
        &said,
        &["certificate", "tls", "handshake", "corrupt message"],
    ) {
        Reach::Tls
    } else if timed_out || said.contains("timed out") {
        Reach::TimedOut
    } else {
        Reach::Other
    }
}

/// An error answer (`status` is `None` for an error inside a 200 stream): the most specific
/// fault its code, type or message names, then what the status alone means.
fn from_answer(status: Option<u16>, codes: &[String], message: &str) -> Fault {
    let text = message.to_ascii_lowercase();
    let codes: Vec<String> = codes.iter().map(|c| c.to_ascii_lowercase()).collect();
    let coded = |names: &[&str]| codes.iter().any(|c| names.contains(&c.as_str()));
    let is = |code: u16| status == Some(code);
    if is(413) || coded(CONTEXT_CODES) || contains_any(&text, CONTEXT_PHRASES) {
        Fault::ContextTooLong
    } else if is(402)
        || codes.iter().any(|c| retry::is_quota_code(c))
        || contains_any(&text, CREDIT_PHRASES)
    {
        Fault::OutOfCredit
    } else if is(401) || coded(AUTH_CODES) || contains_any(&text, AUTH_PHRASES) {
        Fault::KeyRefused
    } else if contains_any(&text, NO_TOOLS_PHRASES) {
        Fault::NoToolSupport
    } else if coded(MODEL_CODES) || names_a_missing_model(&text, &codes) {
        Fault::UnknownModel
    } else if is(429) || coded(RATE_CODES) || contains_any(&text, RATE_PHRASES) {
        Fault::RateLimited
    } else if is(403) || coded(FORBIDDEN_CODES) {
        Fault::Forbidden
    } else if is(404) || is(405) {
        Fault::NoEndpoint
    } else if status.is_some_and(|s| s == 408 || s >= 500)
        || codes
            .iter()
            .any(|c| retry::is_transient_provider_error(Some(c)))
        || text.contains("overloaded")
    {
        Fault::ProviderDown
    } else {
        Fault::Other
    }
}

fn contains_any(text: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| text.contains(p))
}

/// A "not found" that is about the model, in each provider's words: OpenAI, Groq, vLLM
/// ("The model `x` does not exist"), Ollama (`model "x" not found, try pulling it first`),
/// Gemini ("models/x is not found for API version v1beta"), Mistral ("Invalid model: x"),
/// OpenRouter ("x is not a valid model ID"), Anthropic (`not_found_error`, "model: x").
fn names_a_missing_model(text: &str, codes: &[String]) -> bool {
    const MISSING: &[&str] = &[
        "not found",
        "does not exist",
        "not a valid model",
        "invalid model",
        "no such model",
        "unknown model",
    ];
    let not_found_code = codes.iter().any(|c| {
        matches!(
            c.as_str(),
            "not_found_error" | "not_found" | "notfounderror"
        )
    });
    text.contains("model") && (not_found_code || contains_any(text, MISSING))
}

/// OpenAI, Groq, DeepSeek: `context_length_exceeded`; OpenAI: `string_above_max_length`;
/// llama.cpp: `exceed_context_size_error`; Anthropic (413): `request_too_large`.
const CONTEXT_CODES: &[&str] = &[
    "context_length_exceeded",
    "string_above_max_length",
    "exceed_context_size_error",
    "request_too_large",
];

/// OpenAI, vLLM, DeepSeek, Groq, Mistral, OpenRouter: "maximum context length"; Anthropic:
/// "prompt is too long", and "input length and `max_tokens` exceed context limit"; llama.cpp:
/// "exceeds the available context size", and in older builds "Context size has been
/// exceeded" (LM Studio's MLX engine says the same); Gemini: "exceeds the maximum number of
/// tokens"; Ollama: "exceeds the context length"; OpenAI: "context window"; vLLM's engine:
/// "The decoder prompt (length N) is longer than the maximum model length of M"; LM Studio:
/// "Trying to keep the first N tokens when context (the) overflows. However, the model is
/// loaded with (a) context length of only M tokens", "Reached context length of M tokens
/// with model … that does not currently support mid-generation context overflow", and (0.4,
/// as an `event: error` in a `200` stream) "Input does not fit in context length. The input
/// has N tokens, but the context length only supports M tokens".
const CONTEXT_PHRASES: &[&str] = &[
    "maximum context length",
    "context length exceeded",
    "prompt is too long",
    "exceed context limit",
    "exceeds the available context size",
    "context size has been exceeded",
    "exceeds the maximum number of tokens",
    "exceeds the context length",
    "exceeds the context window",
    "reduce the length of the messages",
    "longer than the maximum model length",
    "context length of only",
    "reached context length of",
    "does not fit in context length",
];

/// Anthropic: "Your credit balance is too low" (a 400); DeepSeek (402): "Insufficient
/// Balance"; OpenRouter (402): "Insufficient credits", "requires more credits".
const CREDIT_PHRASES: &[&str] = &[
    "credit balance is too low",
    "insufficient balance",
    "insufficient credits",
    "requires more credits",
];

/// OpenAI: `invalid_api_key`; Anthropic, DeepSeek: `authentication_error`; Gemini:
/// `UNAUTHENTICATED`; OpenRouter: a bare `401` code.
const AUTH_CODES: &[&str] = &[
    "invalid_api_key",
    "authentication_error",
    "unauthenticated",
    "invalid_authentication",
    "401",
];

/// OpenAI: "Incorrect API key provided"; Gemini (a 400 `INVALID_ARGUMENT`): "API key not
/// valid"; Anthropic: "invalid x-api-key"; DeepSeek: "Authentication Fails"; OpenRouter:
/// "No auth credentials found".
const AUTH_PHRASES: &[&str] = &[
    "incorrect api key",
    "invalid api key",
    "api key not valid",
    "invalid x-api-key",
    "authentication fails",
    "no auth credentials",
];

/// Ollama: "x does not support tools"; vLLM: "\"auto\" tool choice requires
/// --enable-auto-tool-choice and --tool-call-parser"; llama.cpp: "tools param requires
/// --jinja flag".
const NO_TOOLS_PHRASES: &[&str] = &[
    "does not support tools",
    "does not support function calling",
    "--enable-auto-tool-choice",
    "requires --jinja",
];

/// OpenAI, Groq: `model_not_found`; Mistral: `invalid_model`.
const MODEL_CODES: &[&str] = &["model_not_found", "invalid_model"];

/// OpenAI, Groq: `rate_limit_exceeded`; Anthropic: `rate_limit_error`; Gemini:
/// `RESOURCE_EXHAUSTED` (also for the free tier's per-minute quota); a bare `429` code.
const RATE_CODES: &[&str] = &[
    "rate_limit_exceeded",
    "rate_limit_error",
    "resource_exhausted",
    "too_many_requests",
    "429",
];

const RATE_PHRASES: &[&str] = &["rate limit", "too many requests"];

/// Anthropic: `permission_error`; Gemini: `PERMISSION_DENIED`; OpenAI:
/// `unsupported_country_region_territory`.
const FORBIDDEN_CODES: &[&str] = &[
    "permission_error",
    "permission_denied",
    "unsupported_country_region_territory",
    "403",
];

#[cfg(test)]
mod tests;
