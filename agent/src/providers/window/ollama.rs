//! Ollama: what it really loads, not the model's maximum. `GET /api/ps` gives a loaded
//! model's `context_length`; `POST /api/show` gives the Modelfile's `num_ctx` (in
//! `parameters`), which is what it will load, and the model's maximum
//! (`model_info["<arch>.context_length"]`). Without either, Ollama loads its server's
//! default (4,096 tokens on a small GPU, `OLLAMA_CONTEXT_LENGTH` when set): its
//! OpenAI-compatible endpoint ignores a request's `num_ctx` (`docs/configuration.md`).

use rojos_llm::{Client, LlmError, ServerPath};
use serde_json::{json, Value};

use super::reported::{get, tokens, Reported, ASK_LIMIT};

/// What `/api/show` says of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Shown {
    /// The Modelfile's `num_ctx`, if it sets one.
    pub num_ctx: Option<u64>,
    /// The most the model takes.
    pub max: Option<u64>,
}

/// Asks `/api/ps` and `/api/show` about `model`.
pub(super) async fn ask(client: &Client, model: &str) -> Result<Option<Reported>, LlmError> {
    let ps = get(client, ServerPath::Root("api/ps")).await;
    if let Some(loaded) = ps.as_ref().ok().and_then(|body| loaded(body, model)) {
        return Ok(Some(Reported {
            tokens: loaded,
            loaded: true,
            how: "Ollama /api/ps (the context it loaded the model with)".to_owned(),
        }));
    }
    let body = json!({ "model": model });
    let shown = match client
        .server_json(ServerPath::Root("api/show"), Some(&body), ASK_LIMIT)
        .await
    {
        Ok(body) => show(&body),
        Err(e) => return ps.and(Err(e)),
    };
    Ok(window(shown))
}

/// The window planned for from what `/api/show` said, the model not being loaded.
pub(super) fn window(shown: Shown) -> Option<Reported> {
    if let Some(num_ctx) = shown.num_ctx {
        return Some(Reported {
            tokens: shown.max.map_or(num_ctx, |max| num_ctx.min(max)),
            loaded: true,
            how: "Ollama /api/show (the Modelfile's num_ctx)".to_owned(),
        });
    }
    // The server's default applies, unknown from here: only a model that takes less than
    // the smallest default tells anything.
    shown
        .max
        .filter(|&max| max < crate::context::OLLAMA_DEFAULT_TOKENS)
        .map(|max| Reported {
            tokens: max,
            loaded: false,
            how: "Ollama /api/show (the model's context_length)".to_owned(),
        })
}

/// The `context_length` `/api/ps` gives `model` (named with or without `:latest`).
pub(super) fn loaded(body: &Value, model: &str) -> Option<u64> {
    let latest = format!("{model}:latest");
    body["models"].as_array()?.iter().find_map(|m| {
        let named = |n: &str| [m["name"].as_str(), m["model"].as_str()].contains(&Some(n));
        (named(model) || (!model.contains(':') && named(&latest)))
            .then(|| tokens(&m["context_length"]))
            .flatten()
    })
}

/// What `/api/show` says: the `num_ctx` line of `parameters`, and the architecture's
/// `context_length` in `model_info`.
pub(super) fn show(body: &Value) -> Shown {
    let num_ctx = body["parameters"].as_str().and_then(|text| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx"))
                .then(|| words.next()?.parse().ok())
                .flatten()
        })
    });
    let info = &body["model_info"];
    let max = info["general.architecture"]
        .as_str()
        .and_then(|arch| tokens(&info[format!("{arch}.context_length")]));
    Shown { num_ctx, max }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: &str = r#"{"models":[{"name":"qwen2.5-coder:7b","model":"qwen2.5-coder:7b","size":5618579456,"digest":"dae161e27b0e90dd1856c8bb3209201fd6736d8eb66298e75ed87571486f4364","details":{"parent_model":"","format":"gguf","family":"qwen2","families":["qwen2"],"parameter_size":"7.6B","quantization_level":"Q4_K_M"},"expires_at":"2025-08-06T14:23:28.7482+02:00","size_vram":5618579456,"context_length":4096},{"name":"hermes3:latest","model":"hermes3:latest","size":8372905984,"digest":"4f6b83f30b62","details":{"format":"gguf","family":"llama"},"expires_at":"2025-07-31T00:50:57.706998+02:00","size_vram":8372905984,"context_length":16384}]}"#;

    const SHOW: &str = r#"{"license":"Apache License","modelfile":"FROM qwen2.5:7b\nPARAMETER num_ctx 8192\n","parameters":"num_ctx                        8192\nstop                           \"<|im_start|>\"\nstop                           \"<|im_end|>\"","template":"{{- if .Messages }}","details":{"parent_model":"","format":"gguf","family":"qwen2","families":["qwen2"],"parameter_size":"7.6B","quantization_level":"Q4_K_M"},"model_info":{"general.architecture":"qwen2","general.basename":"Qwen2.5","general.parameter_count":7615616512,"qwen2.attention.head_count":28,"qwen2.block_count":28,"qwen2.context_length":32768,"qwen2.embedding_length":3584,"tokenizer.ggml.model":"gpt2"},"capabilities":["completion","tools"],"modified_at":"2025-08-01T10:00:00.000000+02:00"}"#;

    #[test]
    fn ps_gives_the_loaded_context_of_the_model() {
        let body: Value = serde_json::from_str(PS).unwrap();
        assert_eq!(loaded(&body, "qwen2.5-coder:7b"), Some(4_096));
        assert_eq!(loaded(&body, "hermes3"), Some(16_384));
        assert_eq!(loaded(&body, "qwen2.5-coder:14b"), None);
        // Before context_length was reported, or nothing loaded.
        assert_eq!(
            loaded(&serde_json::json!({"models": [{"name": "m:latest"}]}), "m"),
            None
        );
        assert_eq!(loaded(&serde_json::json!({"models": []}), "m"), None);
    }

    #[test]
    fn show_gives_the_modelfiles_num_ctx_and_the_models_maximum() {
        let body: Value = serde_json::from_str(SHOW).unwrap();
        let shown = show(&body);
        assert_eq!(
            shown,
            Shown {
                num_ctx: Some(8_192),
                max: Some(32_768)
            }
        );
        let w = window(shown).unwrap();
        assert_eq!((w.tokens, w.loaded), (8_192, true));
        // No num_ctx: the server's default applies, unknown here.
        let plain = Shown {
            num_ctx: None,
            max: Some(32_768),
        };
        assert_eq!(window(plain), None);
        let small = Shown {
            num_ctx: None,
            max: Some(2_048),
        };
        assert_eq!(window(small).map(|w| w.tokens), Some(2_048));
        // A model that takes exactly the smallest default says nothing either.
        let at_default = Shown {
            num_ctx: None,
            max: Some(crate::context::OLLAMA_DEFAULT_TOKENS),
        };
        assert_eq!(window(at_default), None);
        let odd = Shown {
            num_ctx: Some(65_536),
            max: Some(32_768),
        };
        assert_eq!(window(odd).map(|w| w.tokens), Some(32_768));
    }
}
