//! The model's context window in tokens: `context_tokens` of the rojo, else of its provider,
//! else what the provider's server says (`crate::providers::window`), else a table of
//! well-known models, else a conservative default (`docs/configuration.md`, "Context
//! window"). An Ollama server's loaded window bounds even a configured one: it cuts a longer
//! request without an error.

use serde::Serialize;

/// The smallest `context_tokens` accepted: a smaller window holds no useful request.
pub const MIN_CONTEXT_TOKENS: u64 = 1024;

/// How full the window may get, in percent, before older messages are shortened and
/// summarised, unless a rojo's `compact_at_percent` says otherwise.
pub const DEFAULT_COMPACT_AT_PERCENT: u8 = 80;

/// The window assumed for a model nothing else tells about: a small local model's.
const DEFAULT_TOKENS: u64 = 8_192;

/// The window assumed for an Ollama model nothing else tells about: what Ollama loads
/// unless told otherwise (`OLLAMA_CONTEXT_LENGTH`, a Modelfile's `num_ctx`).
pub const OLLAMA_DEFAULT_TOKENS: u64 = 4_096;

/// Well-known models' windows, by the start of their name (checked in order, after any
/// `vendor/` prefix such as OpenRouter's): the smallest window of the family, so a request
/// fitted for it fits every member.
const KNOWN: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-", 200_000),
    ("gemini-1.5-pro", 2_000_000),
    ("gemini-", 1_000_000),
    ("mistral-large", 131_072),
    ("mistral-medium", 131_072),
    ("mistral-small", 32_768),
    ("codestral", 256_000),
    ("open-mistral-nemo", 131_072),
    ("deepseek-", 65_536),
    ("llama-3.1-", 131_072),
    ("llama-3.3-", 131_072),
];

/// Where a window's figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// The rojo's `context_tokens`.
    Rojo,
    /// The provider's `context_tokens`.
    Provider,
    /// What the provider's server has loaded the model with, or will (Ollama's `/api/ps` or
    /// Modelfile `num_ctx`, LM Studio's loaded context, vLLM's `max_model_len`).
    Loaded,
    /// What the provider's model list or model details say the model takes.
    Listed,
    /// The table of well-known models.
    KnownModel,
    /// Nothing said: the conservative default.
    Default,
    /// What the provider really used: its `usage.prompt_tokens` showed it cut the request.
    Truncated,
}

impl WindowSource {
    /// The source as logs and `GET /rojos` name it.
    pub fn name(self) -> &'static str {
        match self {
            WindowSource::Rojo => "rojo",
            WindowSource::Provider => "provider",
            WindowSource::Loaded => "loaded",
            WindowSource::Listed => "listed",
            WindowSource::KnownModel => "known_model",
            WindowSource::Default => "default",
            WindowSource::Truncated => "truncated",
        }
    }
}

/// A model's context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Its size in tokens, the answer included.
    pub tokens: u64,
    /// Where that came from.
    pub source: WindowSource,
}

impl Window {
    /// The window of `model`, given the rojo's and the provider's `context_tokens` and
    /// what the provider's server said (`reported`: tokens, and whether that is what it has
    /// loaded); `ollama`: the provider is an Ollama server (a smaller default, and what it
    /// loaded bounds a configured window: it cuts a longer request without an error).
    pub fn resolve(
        rojo: Option<u64>,
        provider: Option<u64>,
        reported: Option<(u64, bool)>,
        model: &str,
        ollama: bool,
    ) -> Window {
        let configured = rojo
            .map(|t| (t, WindowSource::Rojo))
            .or_else(|| provider.map(|t| (t, WindowSource::Provider)));
        let told = reported.map(|(tokens, loaded)| {
            let source = if loaded {
                WindowSource::Loaded
            } else {
                WindowSource::Listed
            };
            (tokens, source)
        });
        let (tokens, source) = match (configured, told) {
            (Some((c, _)), Some((t, WindowSource::Loaded))) if ollama && t < c => {
                (t, WindowSource::Loaded)
            }
            (Some(configured), _) => configured,
            (None, Some(told)) => told,
            (None, None) => {
                if let Some(tokens) = known(model) {
                    (tokens, WindowSource::KnownModel)
                } else if ollama {
                    (OLLAMA_DEFAULT_TOKENS, WindowSource::Default)
                } else {
                    (DEFAULT_TOKENS, WindowSource::Default)
                }
            }
        };
        Window { tokens, source }
    }

    /// Room kept for the model's answer: a quarter of the window, at most 4,096 tokens.
    pub fn answer_room(self) -> u64 {
        (self.tokens / 4).min(4_096)
    }
}

/// The window of a well-known model, by its name.
fn known(model: &str) -> Option<u64> {
    let model = model.to_ascii_lowercase();
    let name = model.rsplit('/').next().unwrap_or(&model);
    KNOWN
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, tokens)| tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rojo_wins_then_the_provider_then_the_server_then_the_table_then_the_default() {
        let w = Window::resolve(
            Some(9_000),
            Some(5_000),
            Some((7_000, false)),
            "gpt-4o",
            false,
        );
        assert_eq!((w.tokens, w.source), (9_000, WindowSource::Rojo));
        let w = Window::resolve(None, Some(5_000), Some((7_000, true)), "gpt-4o", false);
        assert_eq!((w.tokens, w.source), (5_000, WindowSource::Provider));
        let w = Window::resolve(None, None, Some((7_000, false)), "gpt-4o", false);
        assert_eq!((w.tokens, w.source), (7_000, WindowSource::Listed));
        let w = Window::resolve(None, None, None, "openai/gpt-4o-mini", false);
        assert_eq!((w.tokens, w.source), (128_000, WindowSource::KnownModel));
        assert_eq!(
            Window::resolve(None, None, None, "gpt-4", false).tokens,
            8_192
        );
        let w = Window::resolve(None, None, None, "qwen2.5-coder:7b", true);
        assert_eq!((w.tokens, w.source), (4_096, WindowSource::Default));
        assert_eq!(
            Window::resolve(None, None, None, "local", false).tokens,
            8_192
        );
    }

    #[test]
    fn what_ollama_loaded_bounds_a_configured_window() {
        let w = Window::resolve(Some(32_768), None, Some((4_096, true)), "qwen2.5:7b", true);
        assert_eq!((w.tokens, w.source), (4_096, WindowSource::Loaded));
        // Its maximum does not; nor does any other server's loaded window (it refuses).
        let w = Window::resolve(Some(32_768), None, Some((4_096, false)), "qwen2.5:7b", true);
        assert_eq!(w.source, WindowSource::Rojo);
        let w = Window::resolve(Some(32_768), None, Some((4_096, true)), "m", false);
        assert_eq!(w.source, WindowSource::Rojo);
    }
}
