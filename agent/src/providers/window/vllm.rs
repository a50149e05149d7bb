//! vLLM's `GET /v1/models`: the served model's `max_model_len`, the window it was started
//! with (`--max-model-len`, else the model's own).

use serde_json::Value;

use super::reported::{entry, tokens, Reported};

/// The window of `model` in vLLM's list: what the server runs it with.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let length = tokens(&entry(body, model)?["max_model_len"])?;
    Some(Reported {
        tokens: length,
        loaded: true,
        how: "the model list's max_model_len".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_max_model_len() {
        let body: Value = serde_json::from_str(r#"{"object":"list","data":[{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model","created":1756212345,"owned_by":"vllm","root":"Qwen/Qwen2.5-7B-Instruct","parent":null,"max_model_len":32768,"permission":[{"id":"modelperm-1","object":"model_permission","allow_sampling":true}]}]}"#).unwrap();
        let w = window(&body, "Qwen/Qwen2.5-7B-Instruct").unwrap();
        assert_eq!((w.tokens, w.loaded), (32_768, true));
    }
}
