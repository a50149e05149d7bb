//! Fitting each model turn's request into the model's context window. The stored history
//! stays whole; what is sent is a view of it (`docs/configuration.md`, "Context window"):
//!
//! - `window`: how many tokens the model takes, and where that figure came from;
//! - `measure`: a request's size in tokens, counted by `tokenizer` for OpenAI's models, else
//!   estimated from its bytes and corrected by the provider's own `usage.prompt_tokens` of
//!   earlier turns;
//! - `plan`: what to send: the history as it is, older tool results shortened to a stub,
//!   older turns replaced by their summary, or a single result cut to fit;
//! - `summary`: the summary itself, made by the model and kept in the store
//!   (`rojos_conversations::Compaction`), reused by every later turn and host;
//! - `state`: what a run learns about the window from turn to turn.

mod measure;
mod plan;
mod state;
mod summary;
mod tokenizer;
mod window;

pub(super) use measure::Measure;
pub(super) use plan::{plan, Input, Plan};
pub(super) use state::Fit;
pub(super) use summary::summarise;
pub use window::{
    Window, WindowSource, DEFAULT_COMPACT_AT_PERCENT, MIN_CONTEXT_TOKENS, OLLAMA_DEFAULT_TOKENS,
};
