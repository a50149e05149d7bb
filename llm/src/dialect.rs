//! [`ModelListDialect`]: how a service's model list differs from OpenAI's, set on a
//! [`Provider`](crate::Provider) by its kind and read by `client/models.rs`.

/// How a service's model list differs from OpenAI's `{"data":[{"id":…}]}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ModelListDialect {
    /// OpenAI's list, ids as they are sent in requests.
    #[default]
    OpenAi,
    /// Anthropic: `/v1/models` is its native endpoint (key in `x-api-key`, an
    /// `anthropic-version` header, 20 models a page unless `limit` says more), and it lists
    /// dated ids (`claude-sonnet-4-5-20250929`) for the aliases requests use.
    Anthropic,
    /// Gemini's OpenAI compatibility lists ids as `models/gemini-2.5-flash`; requests name
    /// them without the prefix.
    Gemini,
    /// Ollama: a model named without a tag is its `:latest` (`qwen2.5` is `qwen2.5:latest`).
    Ollama,
}
