//! OpenRouter's `GET /api/v1/models`: each model's `context_length`, and its default
//! provider's (`top_provider.context_length`), which may be smaller.

use serde_json::Value;

use super::reported::{entry, from_list, tokens, Reported};

/// The window of `model` in OpenRouter's list: the smaller of the two lengths.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let model = entry(body, model)?;
    let all = tokens(&model["context_length"]);
    let top = tokens(&model["top_provider"]["context_length"]);
    let length = match (all, top) {
        (Some(a), Some(t)) => a.min(t),
        (a, t) => a.or(t)?,
    };
    Some(from_list(length, "the model list's context_length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_smaller_length() {
        let body: Value = serde_json::from_str(r#"{"data":[{"id":"openai/gpt-4o-mini","canonical_slug":"openai/gpt-4o-mini","name":"OpenAI: GPT-4o-mini","created":1721260800,"description":"GPT-4o mini is OpenAI's newest model.","context_length":128000,"architecture":{"modality":"text+image->text","input_modalities":["text","image","file"],"output_modalities":["text"],"tokenizer":"GPT","instruct_type":null},"pricing":{"prompt":"0.00000015","completion":"0.0000006"},"top_provider":{"context_length":128000,"max_completion_tokens":16384,"is_moderated":true},"per_request_limits":null,"supported_parameters":["max_tokens","tools","tool_choice"]},{"id":"meta-llama/llama-3.1-8b-instruct","context_length":131072,"top_provider":{"context_length":16384,"max_completion_tokens":16384,"is_moderated":false}}]}"#).unwrap();
        assert_eq!(window(&body, "openai/gpt-4o-mini").unwrap().tokens, 128_000);
        assert_eq!(
            window(&body, "meta-llama/llama-3.1-8b-instruct")
                .unwrap()
                .tokens,
            16_384
        );
        assert_eq!(window(&body, "openai/gpt-4o"), None);
    }
}
