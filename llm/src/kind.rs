//! [`ProviderKind`]: the OpenAI-compatible services Rojos knows by name. A kind fills in its
//! base URL, the environment variable its API key usually lives in, a model to start with,
//! and the request quirks the service needs, so a `[providers.NAME]` table can be as short as
//! `kind = "openai"`.

use crate::{dialect::ModelListDialect, history::EmptyContent, provider::Provider};

/// A service Rojos knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderKind {
    /// OpenAI's API.
    OpenAi,
    /// Anthropic's OpenAI SDK compatibility endpoint.
    Anthropic,
    /// Google's Gemini API, OpenAI compatibility endpoint.
    Gemini,
    /// Mistral's La Plateforme.
    Mistral,
    /// OpenRouter.
    OpenRouter,
    /// Groq.
    Groq,
    /// DeepSeek.
    DeepSeek,
    /// A local Ollama.
    Ollama,
    /// A local LM Studio server.
    LmStudio,
    /// A local vLLM server.
    Vllm,
    /// A local llama.cpp server (`llama-server`).
    LlamaCpp,
}

/// What a kind fills in.
struct Facts {
    name: &'static str,
    label: &'static str,
    base_url: &'static str,
    api_key_env: Option<&'static str>,
    default_model: Option<&'static str>,
    /// How to make the service available: where to get a key, or how to start it.
    setup: &'static str,
}

impl ProviderKind {
    /// Every kind, hosted ones first, in the order `rojos init` offers them.
    pub const ALL: [ProviderKind; 11] = [
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Gemini,
        ProviderKind::Mistral,
        ProviderKind::OpenRouter,
        ProviderKind::Groq,
        ProviderKind::DeepSeek,
        ProviderKind::Ollama,
        ProviderKind::LmStudio,
        ProviderKind::Vllm,
        ProviderKind::LlamaCpp,
    ];

    fn facts(self) -> Facts {
        let hosted = |name, label, base_url, key, model, setup| Facts {
            name,
            label,
            base_url,
            api_key_env: Some(key),
            default_model: Some(model),
            setup,
        };
        let local = |name, label, base_url, setup| Facts {
            name,
            label,
            base_url,
            api_key_env: None,
            default_model: None,
            setup,
        };
        match self {
            ProviderKind::OpenAi => hosted(
                "openai",
                "OpenAI",
                "https://api.openai.com/v1",
                "OPENAI_API_KEY",
                "gpt-4.1-mini",
                "get a key at https://platform.openai.com/api-keys",
            ),
            ProviderKind::Anthropic => hosted(
                "anthropic",
                "Anthropic",
                "https://api.anthropic.com/v1",
                "ANTHROPIC_API_KEY",
                "claude-sonnet-4-5",
                "get a key at https://console.anthropic.com/settings/keys",
            ),
            ProviderKind::Gemini => hosted(
                "gemini",
                "Gemini",
                "https://generativelanguage.googleapis.com/v1beta/openai",
                "GEMINI_API_KEY",
                "gemini-2.5-flash",
                "get a key at https://aistudio.google.com/apikey",
            ),
            ProviderKind::Mistral => hosted(
                "mistral",
                "Mistral",
                "https://api.mistral.ai/v1",
                "MISTRAL_API_KEY",
                "mistral-medium-latest",
                "get a key at https://console.mistral.ai/api-keys",
            ),
            ProviderKind::OpenRouter => hosted(
                "openrouter",
                "OpenRouter",
                "https://openrouter.ai/api/v1",
                "OPENROUTER_API_KEY",
                "openai/gpt-4.1-mini",
                "get a key at https://openrouter.ai/settings/keys",
            ),
            ProviderKind::Groq => hosted(
                "groq",
                "Groq",
                "https://api.groq.com/openai/v1",
                "GROQ_API_KEY",
                "llama-3.3-70b-versatile",
                "get a key at https://console.groq.com/keys",
            ),
            ProviderKind::DeepSeek => hosted(
                "deepseek",
                "DeepSeek",
                "https://api.deepseek.com/v1",
                "DEEPSEEK_API_KEY",
                "deepseek-chat",
                "get a key at https://platform.deepseek.com/api_keys",
            ),
            ProviderKind::Ollama => local(
                "ollama",
                "Ollama",
                "http://127.0.0.1:11434/v1",
                "start it with `ollama serve` and pull a model with tool support (`ollama pull qwen2.5:7b`)",
            ),
            ProviderKind::LmStudio => local(
                "lmstudio",
                "LM Studio",
                "http://127.0.0.1:1234/v1",
                "start its server (Developer tab, or `lms server start`) and load a model",
            ),
            ProviderKind::Vllm => local(
                "vllm",
                "vLLM",
                "http://127.0.0.1:8000/v1",
                "start it with `vllm serve MODEL --enable-auto-tool-choice --tool-call-parser PARSER`",
            ),
            // llama-server's own default port is 8080, Rojos's too: one of them must move.
            ProviderKind::LlamaCpp => local(
                "llamacpp",
                "llama.cpp",
                "http://127.0.0.1:8081/v1",
                "start it with `llama-server --jinja --port 8081 -m MODEL.gguf`",
            ),
        }
    }

    /// The kind whose [`name`](Self::name) is `name`; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The name in `rojos.toml` (`kind = "lmstudio"`).
    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// The name people know it by ("LM Studio").
    pub fn label(self) -> &'static str {
        self.facts().label
    }

    /// Its OpenAI-compatible API root.
    pub fn base_url(self) -> &'static str {
        self.facts().base_url
    }

    /// The environment variable its API key usually lives in; `None` for a local server.
    pub fn api_key_env(self) -> Option<&'static str> {
        self.facts().api_key_env
    }

    /// A model with tool support to start with; `None` for a local server, whose models are
    /// whatever its user installed.
    pub fn default_model(self) -> Option<&'static str> {
        self.facts().default_model
    }

    /// Whether it runs on the user's machine (no key; available when it answers).
    pub fn is_local(self) -> bool {
        self.facts().api_key_env.is_none()
    }

    /// One sentence saying how to make it available: where to get a key, or how to start it.
    pub fn setup_hint(self) -> &'static str {
        self.facts().setup
    }

    /// Sets the request quirks this service needs on `provider`.
    pub fn apply_quirks(self, provider: &mut Provider) {
        // Gemini rejects an assistant message whose `content` is `null`.
        if self == ProviderKind::Gemini {
            provider.empty_content = EmptyContent::EmptyString;
        }
        // Ollama cuts a request too long for the context it loaded without an error: only
        // the usage chunk's `prompt_tokens` shows it, and it sends one only when asked.
        if self == ProviderKind::Ollama {
            provider.include_usage = true;
        }
        // How the model list differs from OpenAI's: see `ModelListDialect`.
        provider.model_list = match self {
            ProviderKind::Anthropic => ModelListDialect::Anthropic,
            ProviderKind::Gemini => ModelListDialect::Gemini,
            ProviderKind::Ollama => ModelListDialect::Ollama,
            _ => ModelListDialect::OpenAi,
        };
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_by_its_name_and_has_a_usable_url() {
        for kind in ProviderKind::ALL {
            assert_eq!(ProviderKind::from_name(kind.name()), Some(kind));
            assert!(
                crate::chat_completions_url(kind.base_url()).is_ok(),
                "{kind}"
            );
            assert_eq!(kind.is_local(), kind.default_model().is_none(), "{kind}");
        }
        assert_eq!(ProviderKind::from_name("OpenAI"), None);
    }

    #[test]
    fn the_table_gives_each_kind_its_label_key_hint_and_model_list() {
        use crate::ModelListDialect;
        assert_eq!(ProviderKind::LmStudio.label(), "LM Studio");
        assert_eq!(ProviderKind::LlamaCpp.to_string(), "llamacpp");
        assert_eq!(ProviderKind::OpenAi.api_key_env(), Some("OPENAI_API_KEY"));
        assert_eq!(ProviderKind::Ollama.api_key_env(), None);
        assert!(ProviderKind::Ollama
            .setup_hint()
            .starts_with("start it with `ollama serve`"));
        let dialect = |kind: ProviderKind| {
            let mut p = Provider::new(kind.base_url(), "m");
            kind.apply_quirks(&mut p);
            p.model_list
        };
        assert_eq!(
            dialect(ProviderKind::Anthropic),
            ModelListDialect::Anthropic
        );
        assert_eq!(dialect(ProviderKind::Gemini), ModelListDialect::Gemini);
        assert_eq!(dialect(ProviderKind::Ollama), ModelListDialect::Ollama);
        assert_eq!(dialect(ProviderKind::Groq), ModelListDialect::OpenAi);
    }

    #[test]
    fn only_gemini_stores_empty_text_as_an_empty_string() {
        for kind in ProviderKind::ALL {
            let mut p = Provider::new(kind.base_url(), "m");
            kind.apply_quirks(&mut p);
            let expected = if kind == ProviderKind::Gemini {
                EmptyContent::EmptyString
            } else {
                EmptyContent::Null
            };
            assert_eq!(p.empty_content, expected, "{kind}");
        }
    }
}
