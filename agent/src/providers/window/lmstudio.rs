//! LM Studio's `GET /api/v0/models`: a loaded model's `loaded_context_length` (what it runs
//! with), else its `max_context_length`; a model not loaded yet is loaded on first use with
//! LM Studio's default context, which is no more than 4,096 tokens unless its settings say
//! otherwise, so that is what is planned for.

use serde_json::Value;

use super::reported::{entry, tokens, Reported};

/// What LM Studio loads a model with unless told otherwise.
const LOAD_DEFAULT: u64 = 4_096;

/// The window of `model` in LM Studio's list.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let model = entry(body, model)?;
    if let Some(loaded) = tokens(&model["loaded_context_length"]) {
        return Some(Reported {
            tokens: loaded,
            loaded: true,
            how: "LM Studio's loaded_context_length".to_owned(),
        });
    }
    let max = tokens(&model["max_context_length"])?;
    Some(Reported {
        tokens: max.min(LOAD_DEFAULT),
        loaded: false,
        how: format!("LM Studio's default load (the model is not loaded; it takes up to {max})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_model_has_its_loaded_length_else_the_default_load() {
        let body: Value = serde_json::from_str(r#"{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","type":"llm","publisher":"lmstudio-community","arch":"qwen2","compatibility_type":"gguf","quantization":"Q4_K_M","state":"loaded","max_context_length":32768,"loaded_context_length":16384},{"id":"meta-llama-3.1-8b-instruct","object":"model","type":"llm","publisher":"lmstudio-community","arch":"llama","compatibility_type":"gguf","quantization":"Q4_K_M","state":"not-loaded","max_context_length":131072},{"id":"tiny","state":"not-loaded","max_context_length":2048}]}"#).unwrap();
        let w = window(&body, "qwen2.5-7b-instruct").unwrap();
        assert_eq!((w.tokens, w.loaded), (16_384, true));
        let w = window(&body, "meta-llama-3.1-8b-instruct").unwrap();
        assert_eq!((w.tokens, w.loaded), (4_096, false));
        assert_eq!(window(&body, "tiny").unwrap().tokens, 2_048);
        assert_eq!(window(&body, "absent"), None);
    }
}
