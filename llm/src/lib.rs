//! The provider client: streams one model turn from any OpenAI-compatible Chat Completions
//! endpoint (OpenAI, Anthropic's and Gemini's compatible endpoints, Mistral, Ollama, LM
//! Studio, vLLM, llama.cpp, OpenRouter) and absorbs their quirks. It knows the wire and
//! nothing about tools' implementation, storage or HTTP serving.
//!
//! # Layout
//!
//! - `provider` — [`Provider`]: URL, model, key, headers, time-outs, retry policy, limits.
//! - `kind` — [`ProviderKind`]: the services known by name (URL, key variable, quirks).
//! - `request` — [`ChatRequest`] (borrowed) and [`SharedChatRequest`] (messages shared with
//!   the caller), the request body, tool sanitising, the endpoint URL.
//! - `client` — [`Client::stream_turn`] and [`Client::stream_shared`]: connect, retry before
//!   output (each attempt's body written again, none kept between: `client/run.rs`), pick the
//!   decoder (`client/answer.rs`); `client/models.rs` — [`Client::list_models`],
//!   [`ModelList`] (the services' list quirks).
//! - `stream` — [`TurnStream`] and [`decode_stream`]: a body under idle/turn time-outs.
//! - `sse` — bytes → SSE events (`sse/framer.rs`: linear, capped) → chunk / `[DONE]` /
//!   in-stream error.
//! - `wire` — tolerant serde types for chunks and provider error objects.
//! - `assemble` — chunks → text deltas and whole tool calls → [`Turn`] (provider quirks).
//! - `turn` — [`Turn`], [`ToolCall`], [`FinishReason`], [`Usage`], [`TurnEvent`].
//! - `history` — the assistant and `tool` messages to append to the history, and
//!   [`MessageText`]: a history's message written as JSON once.
//! - `json_type` — [`json_type_name`], a JSON value's type for messages ("an array").
//! - `retry` — retryable statuses, `Retry-After`, backoff.
//! - `redact` — [`display_url`], and the provider's secrets kept out of its error messages.
//! - `secret` — [`Secret`]: an API key or token whose `Debug` and `Display` never show it.
//! - `error` — [`LlmError`], [`SizeLimit`].
//! - `fault` — [`Fault`], [`Reach`]: what kind of failure an [`LlmError`] is, for the user.
//!
//! # Use from an agent loop
//!
//! ```no_run
//! use futures_util::StreamExt;
//! use rojos_llm::{user_message, ChatRequest, Client, MessageText, Provider, ToolChoice, TurnEvent};
//!
//! # async fn run() -> Result<(), rojos_llm::LlmError> {
//! let client = Client::new(Provider::new("http://127.0.0.1:11434/v1", "qwen2.5:7b"))?;
//! let mut history = vec![MessageText::new(&user_message("hi"))];
//! let request = ChatRequest { system: None, messages: &history, tools: vec![], tool_choice: Some(ToolChoice::Auto) };
//! let mut turn = client.stream_turn(&request); // dropping it cancels the turn
//! while let Some(event) = turn.next().await {
//!     match event? {
//!         TurnEvent::TextDelta(text) => print!("{text}"), // forward as it arrives
//!         TurnEvent::ToolCallStarted { name, .. } => eprintln!("calling {name}…"),
//!         TurnEvent::ToolCallProgress { .. } => {} // argument bytes so far: live status only
//!         TurnEvent::Finished(turn) => {
//!             history.push(MessageText::new(&client.assistant_message(&turn)));
//!             for call in &turn.tool_calls {
//!                 let result = match &call.arguments {
//!                     Ok(_args) => "…run the tool…".to_string(),
//!                     Err(why) => format!("error: {why}"),
//!                 };
//!                 history.push(MessageText::new(&rojos_llm::tool_message(&call.id, result)));
//!             }
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod assemble;
mod client;
mod dialect;
mod endpoint;
mod error;
mod fault;
mod history;
mod json_type;
mod kind;
mod limits;
mod provider;
mod redact;
mod request;
mod retry;
mod secret;
mod sse;
mod stream;
mod text;
mod turn;
mod wire;

pub use client::info::{server_url, ServerPath};
pub use client::models::{ModelList, LIST_MODELS_TIMEOUT};
pub use client::Client;
pub use dialect::ModelListDialect;
pub use endpoint::{display_url, endpoint_host};
pub use error::{BoxError, LlmError, SizeLimit};
pub use fault::{Fault, Reach};
pub use history::{
    assistant_message, assistant_text_message, system_message, tool_message, user_message,
    EmptyContent, MessageText,
};
pub use json_type::json_type_name;
pub use kind::ProviderKind;
pub use limits::Limits;
pub use provider::{Provider, Timeouts};
pub use request::{
    chat_completions_url, sanitize_schema, sanitize_tool, validate_tool_name, ChatRequest,
    SharedChatRequest, ToolChoice, ToolDefinition,
};
pub use retry::RetryPolicy;
pub use secret::Secret;
pub use stream::{decode_stream, DecodeOptions, TurnStream};
pub use turn::{FinishReason, ToolCall, Turn, TurnEvent, Usage};
