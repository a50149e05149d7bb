//! Together's `GET /v1/models`: a bare array, each model's `context_length`.

use serde_json::Value;

use super::reported::{entry, from_list, tokens, Reported};

/// The window of `model` in Together's list.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let length = tokens(&entry(body, model)?["context_length"])?;
    Some(from_list(length, "the model list's context_length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_bare_array() {
        let body: Value = serde_json::from_str(r#"[{"id":"meta-llama/Llama-3.3-70B-Instruct-Turbo","object":"model","created":1733443200,"type":"chat","running":false,"display_name":"Meta Llama 3.3 70B Instruct Turbo","organization":"Meta","link":"https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct-Turbo","license":"llama3.3","context_length":131072,"config":{"chat_template":null,"stop":["<|eot_id|>"],"bos_token":null,"eos_token":null},"pricing":{"hourly":0,"input":0.88,"output":0.88,"base":0,"finetune":0}}]"#).unwrap();
        let w = window(&body, "meta-llama/Llama-3.3-70B-Instruct-Turbo").unwrap();
        assert_eq!((w.tokens, w.loaded), (131_072, false));
    }
}
