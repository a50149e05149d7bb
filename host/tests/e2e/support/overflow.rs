//! Each provider family's real answer to a request over its context window, as the scripted
//! upstream sends it ([`super::upstream::ScriptedUpstream::start_windowed`]): the status and
//! the body exactly as that provider writes them (the token counts are the only thing
//! changed, to an 8,192-token window). A status of 200 is a stream: the body is sent as
//! `text/event-stream`.

/// One family's overflow answer.
#[derive(Debug, Clone, Copy)]
pub struct Overflow {
    /// The family, for messages.
    pub family: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: &'static str,
}

/// OpenAI (Groq and DeepSeek answer alike).
pub const OPENAI: Overflow = Overflow {
    family: "OpenAI",
    status: 400,
    body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
};

/// Anthropic's OpenAI-compatible endpoint: Anthropic's own error object.
pub const ANTHROPIC: Overflow = Overflow {
    family: "Anthropic",
    status: 400,
    body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 9120 tokens > 8192 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}"#,
};

/// Gemini's OpenAI-compatible endpoint: Google's error, in a one-element array.
pub const GEMINI: Overflow = Overflow {
    family: "Gemini",
    status: 400,
    body: r#"[{"error":{"code":400,"message":"The input token count (9120) exceeds the maximum number of tokens allowed (8192).","status":"INVALID_ARGUMENT"}}]"#,
};

/// Mistral.
pub const MISTRAL: Overflow = Overflow {
    family: "Mistral",
    status: 400,
    body: r#"{"object":"error","message":"Prompt contains 9120 tokens and 0 draft tokens, too large for model with 8192 maximum context length","type":"invalid_request_error","param":null,"code":null}"#,
};

/// vLLM's OpenAI server.
pub const VLLM: Overflow = Overflow {
    family: "vLLM",
    status: 400,
    body: r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9120 tokens (8096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
};

/// vLLM's engine, when the prompt alone is over `max_model_len`.
pub const VLLM_ENGINE: Overflow = Overflow {
    family: "vLLM (engine)",
    status: 400,
    body: r#"{"object":"error","message":"The decoder prompt (length 9120) is longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}"#,
};

/// llama.cpp's server.
pub const LLAMACPP: Overflow = Overflow {
    family: "llama.cpp",
    status: 400,
    body: r#"{"error":{"code":400,"message":"request (9120 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9120,"n_ctx":8192}}"#,
};

/// llama.cpp's server before its late-2025 rewrite: a `200` stream whose error is an
/// `error:` line, a field the SSE spec does not have, then `[DONE]`.
pub const LLAMACPP_OLD_STREAM: Overflow = Overflow {
    family: "llama.cpp (error: field)",
    status: 200,
    body: "error: {\"code\":400,\"message\":\"the request exceeds the available context size. try increasing the context size or enable context shift\",\"type\":\"invalid_request_error\"}\n\ndata: [DONE]\n\n",
};

/// Ollama.
pub const OLLAMA: Overflow = Overflow {
    family: "Ollama",
    status: 400,
    body: r#"{"error":{"message":"the input length exceeds the context length","type":"invalid_request_error","param":null,"code":null}}"#,
};

/// LM Studio: its message as a bare string.
pub const LMSTUDIO: Overflow = Overflow {
    family: "LM Studio",
    status: 400,
    body: r#"{"error":"Trying to keep the first 9120 tokens when context the overflows. However, the model is loaded with context length of only 8192 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
};

/// LM Studio's MLX engine, whose error says what llama.cpp's older builds said.
pub const LMSTUDIO_MLX: Overflow = Overflow {
    family: "LM Studio (MLX)",
    status: 400,
    body: r#"{"error":"Context size has been exceeded."}"#,
};

/// LM Studio 0.4: a `200` stream whose only event is an `event: error` (its message twice,
/// inside `error` and beside it), as captured from LM Studio 0.4.21's `/v1/chat/completions`.
pub const LMSTUDIO_STREAM: Overflow = Overflow {
    family: "LM Studio 0.4 (event: error)",
    status: 200,
    body: "event: error\ndata: {\"error\":{\"message\":\"Input does not fit in context length. The input has 9120 tokens, but the context length only supports 8192 tokens.\"},\"message\":\"Input does not fit in context length. The input has 9120 tokens, but the context length only supports 8192 tokens.\"}\n\n",
};
