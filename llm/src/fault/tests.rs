//! Each provider's real error answers, read the way the client reads them (the body through
//! `describe_error_body`, an in-stream error through `describe_error`), and the fault they
//! are. Bodies as the providers send them; the comment names the provider and the case.

use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::error::SizeLimit;
use crate::wire::{describe_error, describe_error_body};

/// The fault of an HTTP error answer with `body`.
fn answer(status: u16, body: &str) -> Fault {
    let info = describe_error_body(status, body);
    LlmError::Status {
        provider: "h".into(),
        code: status,
        message: info.message,
        codes: info.tags,
    }
    .fault()
}

/// The fault of an error object inside a 200 stream.
fn in_stream(data: &str) -> Fault {
    let value: Value = serde_json::from_str(data).expect("test JSON");
    let info = describe_error(&value).expect("an error object");
    LlmError::Provider {
        provider: "h".into(),
        message: info.message,
        code: info.code,
    }
    .fault()
}

fn check(cases: &[(u16, &str, Fault)]) {
    for (status, body, fault) in cases {
        assert_eq!(answer(*status, body), *fault, "HTTP {status}: {body}");
    }
}

#[test]
fn a_refused_key_is_recognised_in_every_providers_shape() {
    check(&[
        // OpenAI
        (
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
            Fault::KeyRefused,
        ),
        // Anthropic
        (
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CXw8h8A796q3f74Ezmhav"}"#,
            Fault::KeyRefused,
        ),
        // Gemini answers a bad key with 400 INVALID_ARGUMENT, in a list
        (
            400,
            r#"[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}]"#,
            Fault::KeyRefused,
        ),
        // Mistral
        (
            401,
            r#"{"message":"Unauthorized","request_id":"9c3f0b1e2d"}"#,
            Fault::KeyRefused,
        ),
        // OpenRouter
        (
            401,
            r#"{"error":{"message":"No auth credentials found","code":401}}"#,
            Fault::KeyRefused,
        ),
        // DeepSeek
        (
            401,
            r#"{"error":{"message":"Authentication Fails (no such user)","type":"authentication_error","param":null,"code":"invalid_request_error"}}"#,
            Fault::KeyRefused,
        ),
        // Groq
        (
            401,
            r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            Fault::KeyRefused,
        ),
    ]);
}

#[test]
fn an_unknown_model_is_recognised_in_every_providers_shape() {
    check(&[
        // OpenAI
        (
            404,
            r#"{"error":{"message":"The model `gpt-5-mini` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
            Fault::UnknownModel,
        ),
        // Ollama's OpenAI-compatible endpoint
        (
            404,
            r#"{"error":{"message":"model \"qwen2.5:7b\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#,
            Fault::UnknownModel,
        ),
        // Anthropic
        (
            404,
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
            Fault::UnknownModel,
        ),
        // Gemini
        (
            404,
            r#"[{"error":{"code":404,"message":"models/gemini-nope is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}]"#,
            Fault::UnknownModel,
        ),
        // Mistral answers 400
        (
            400,
            r#"{"object":"error","message":"Invalid model: mistral-nope","type":"invalid_model","param":null,"code":"1500"}"#,
            Fault::UnknownModel,
        ),
        // OpenRouter answers 400
        (
            400,
            r#"{"error":{"message":"openai/gpt-nope is not a valid model ID","code":400},"user_id":"user_2x"}"#,
            Fault::UnknownModel,
        ),
        // vLLM
        (
            404,
            r#"{"object":"error","message":"The model `llama-nope` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
            Fault::UnknownModel,
        ),
    ]);
}

#[test]
fn a_404_or_405_without_a_model_message_is_a_wrong_endpoint() {
    check(&[
        // Ollama's router for a path it does not have (base_url without /v1)
        (404, "404 page not found", Fault::NoEndpoint),
        // A web server's page
        (
            404,
            "<!DOCTYPE html><html><head><title>404 Not Found</title></head></html>",
            Fault::NoEndpoint,
        ),
        // Anthropic for some keys, whatever was not found
        (
            404,
            r#"{"type":"error","error":{"type":"not_found_error","message":"Not found"}}"#,
            Fault::NoEndpoint,
        ),
        (405, "", Fault::NoEndpoint),
    ]);
}

#[test]
fn rate_limits_and_exhausted_credit_are_told_apart() {
    check(&[
        // OpenAI, rate
        (
            429,
            r#"{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000, Requested 2000. Please try again in 300ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
            Fault::RateLimited,
        ),
        // OpenAI, quota: also a 429, never worth waiting for
        (
            429,
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
            Fault::OutOfCredit,
        ),
        // Anthropic
        (
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
            Fault::RateLimited,
        ),
        // Anthropic's empty balance is a 400
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#,
            Fault::OutOfCredit,
        ),
        // Gemini's free tier: per-minute quota, worded like billing
        (
            429,
            r#"[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in 33.5s.","status":"RESOURCE_EXHAUSTED"}}]"#,
            Fault::RateLimited,
        ),
        // Mistral
        (
            429,
            r#"{"message":"Requests rate limit exceeded"}"#,
            Fault::RateLimited,
        ),
        // Groq
        (
            429,
            r#"{"error":{"message":"Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_x` service tier `on_demand` on tokens per minute (TPM): Limit 12000, Used 11000, Requested 2000. Please try again in 5s.","type":"tokens","code":"rate_limit_exceeded"}}"#,
            Fault::RateLimited,
        ),
        // DeepSeek
        (
            402,
            r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#,
            Fault::OutOfCredit,
        ),
        // OpenRouter
        (
            402,
            r#"{"error":{"message":"This request requires more credits, or fewer max_tokens. You requested up to 4096 tokens, but can only afford 1000.","code":402}}"#,
            Fault::OutOfCredit,
        ),
    ]);
}

#[test]
fn a_conversation_too_long_is_recognised_in_every_providers_shape() {
    check(&[
        // OpenAI, Groq
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            Fault::ContextTooLong,
        ),
        // Anthropic
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            Fault::ContextTooLong,
        ),
        // Gemini
        (
            400,
            r#"[{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]"#,
            Fault::ContextTooLong,
        ),
        // Mistral
        (
            400,
            r#"{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_error","param":null,"code":null}"#,
            Fault::ContextTooLong,
        ),
        // vLLM
        (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
            Fault::ContextTooLong,
        ),
        // llama.cpp
        (
            400,
            r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
            Fault::ContextTooLong,
        ),
        // Ollama
        (
            400,
            r#"{"error":{"message":"the input length exceeds the context length","type":"invalid_request_error","param":null,"code":null}}"#,
            Fault::ContextTooLong,
        ),
        // DeepSeek
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#,
            Fault::ContextTooLong,
        ),
        // Anthropic, the input and `max_tokens` together over the window
        (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 196758 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}"#,
            Fault::ContextTooLong,
        ),
        // vLLM's engine
        (
            400,
            r#"{"object":"error","message":"The decoder prompt (length 9120) is longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}"#,
            Fault::ContextTooLong,
        ),
        // llama.cpp before its error type, and LM Studio's MLX engine
        (
            500,
            r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"server_error"}}"#,
            Fault::ContextTooLong,
        ),
        // LM Studio, both of its wordings
        (
            400,
            r#"{"error":"Trying to keep the first 9120 tokens when context the overflows. However, the model is loaded with context length of only 8192 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
            Fault::ContextTooLong,
        ),
        (
            400,
            r#"{"error":"Trying to keep the first 6547 tokens when context overflows. However, the model is loaded with a context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input."}"#,
            Fault::ContextTooLong,
        ),
        (
            400,
            r#"{"error":"Reached context length of 4096 tokens with model (arch: qwen3vlmoe) that does not currently support mid-generation context overflow. Try reloading with a larger context length or shortening the prompt/chat."}"#,
            Fault::ContextTooLong,
        ),
        // LM Studio 0.4, the data of an `event: error` in a 200 stream
        (
            200,
            r#"{"error":{"message":"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens."},"message":"Input does not fit in context length. The input has 31430 tokens, but the context length only supports 30000 tokens."}"#,
            Fault::ContextTooLong,
        ),
        // Anthropic, a body over its request size
        (
            413,
            r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
            Fault::ContextTooLong,
        ),
    ]);
}

#[test]
fn tools_turned_off_forbidden_and_server_failures_are_recognised() {
    check(&[
        // Ollama, a model without tool support
        (
            400,
            r#"{"error":{"message":"registry.ollama.ai/library/gemma2:2b does not support tools","type":"api_error","param":null,"code":null}}"#,
            Fault::NoToolSupport,
        ),
        // vLLM started without tool calling
        (
            400,
            r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}"#,
            Fault::NoToolSupport,
        ),
        // Anthropic
        (
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#,
            Fault::Forbidden,
        ),
        // OpenAI
        (
            403,
            r#"{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}"#,
            Fault::Forbidden,
        ),
        // Anthropic's 529
        (
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            Fault::ProviderDown,
        ),
        (
            500,
            r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#,
            Fault::ProviderDown,
        ),
        (
            502,
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
            Fault::ProviderDown,
        ),
        // Anything else: the provider's own message
        (
            400,
            r#"{"error":{"message":"Invalid 'messages[1].content': string too short.","type":"invalid_request_error","param":"messages[1].content","code":null}}"#,
            Fault::Other,
        ),
    ]);
}

#[test]
fn errors_inside_a_stream_are_read_like_answers() {
    // Anthropic, mid-stream
    assert_eq!(
        in_stream(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
        Fault::ProviderDown
    );
    // vLLM, as a chunk
    assert_eq!(
        in_stream(
            r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","param":null,"code":400}"#
        ),
        Fault::ContextTooLong
    );
    // OpenRouter, an upstream's rate limit inside the stream
    assert_eq!(
        in_stream(
            r#"{"error":{"message":"Rate limit exceeded: free-models-per-min.","code":429}}"#
        ),
        Fault::RateLimited
    );
    assert_eq!(
        in_stream(r#"{"error":{"message":"Something odd happened","code":"weird"}}"#),
        Fault::Other
    );
}

#[test]
fn transport_failures_say_why_the_provider_was_unreachable() {
    fn connect(source: impl Into<crate::BoxError>) -> Fault {
        LlmError::Connect {
            provider: "h".into(),
            source: source.into(),
        }
        .fault()
    }
    /// An error wrapping `inner`, as hyper-util's `ConnectError` does.
    #[derive(Debug)]
    struct Wrapped(&'static str, std::io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.1)
        }
    }
    let refused = std::io::Error::new(ErrorKind::ConnectionRefused, "Connection refused");
    assert_eq!(
        connect(Wrapped("tcp connect error", refused)),
        Fault::Unreachable(Reach::Refused)
    );
    let dns =
        std::io::Error::other("failed to lookup address information: Name or service not known");
    assert_eq!(
        connect(Wrapped("dns error", dns)),
        Fault::Unreachable(Reach::NameNotResolved)
    );
    let tls = std::io::Error::new(
        ErrorKind::InvalidData,
        "invalid peer certificate: UnknownIssuer",
    );
    assert_eq!(connect(tls), Fault::Unreachable(Reach::Tls));
    let slow = std::io::Error::new(ErrorKind::TimedOut, "connection timed out");
    assert_eq!(connect(slow), Fault::Unreachable(Reach::TimedOut));
    let reset = std::io::Error::new(ErrorKind::ConnectionReset, "connection reset by peer");
    assert_eq!(connect(reset), Fault::Unreachable(Reach::Other));
    // A time-out known only from the words of an error that is not an io::Error of that kind.
    let said_slow = std::io::Error::other("operation timed out");
    assert_eq!(
        connect(Wrapped("error sending request", said_slow)),
        Fault::Unreachable(Reach::TimedOut)
    );
}

#[test]
fn the_other_variants_have_their_own_fault() {
    let p = || "h".to_string();
    let cases = [
        (
            LlmError::StreamCut {
                provider: p(),
                source: None,
            },
            Fault::StreamCut,
        ),
        (
            LlmError::IdleTimeout {
                provider: p(),
                after: Duration::from_secs(1),
            },
            Fault::IdleTimeout,
        ),
        (
            LlmError::TurnTimeout {
                provider: p(),
                after: Duration::from_secs(1),
            },
            Fault::TurnTimeout,
        ),
        (
            LlmError::Malformed {
                provider: p(),
                detail: "data is not JSON".into(),
            },
            Fault::NotCompatible,
        ),
        (
            LlmError::EmptyTurn {
                provider: p(),
                received: "only [DONE]".into(),
            },
            Fault::EmptyTurn,
        ),
        (
            LlmError::LengthBeforeOutput { provider: p() },
            Fault::OutOfTokens,
        ),
        (
            LlmError::TooLarge {
                provider: p(),
                limit: SizeLimit::Turn { max_bytes: 1 },
            },
            Fault::TooLarge,
        ),
        (
            LlmError::InvalidConfig {
                detail: "bad header".into(),
            },
            Fault::Request,
        ),
    ];
    for (error, fault) in cases {
        assert_eq!(error.fault(), fault, "{error}");
    }
}

#[test]
fn each_sign_alone_is_enough_the_status_the_code_or_the_words() {
    check(&[
        // A proxy's own 413, with nothing about tokens in it.
        (
            413,
            "<html><body>413 Request Entity Too Large</body></html>",
            Fault::ContextTooLong,
        ),
        // A bare 429.
        (429, "slow down", Fault::RateLimited),
        // The code alone, under another status.
        (
            400,
            r#"{"error":{"message":"try later","code":"rate_limit_exceeded"}}"#,
            Fault::RateLimited,
        ),
        // The words alone.
        (
            400,
            r#"{"error":{"message":"Too many requests, please wait"}}"#,
            Fault::RateLimited,
        ),
        // A bare 403.
        (403, "no", Fault::Forbidden),
    ]);
    // A provider overloaded, said only in words inside a stream.
    assert_eq!(
        in_stream(r#"{"error":{"message":"The engine is overloaded, retry later"}}"#),
        Fault::ProviderDown
    );
}
