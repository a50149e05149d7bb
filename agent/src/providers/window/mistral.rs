//! Mistral's `GET /v1/models`: each model's `max_context_length`.

use serde_json::Value;

use super::reported::{entry, from_list, tokens, Reported};

/// The window of `model` in Mistral's list.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let length = tokens(&entry(body, model)?["max_context_length"])?;
    Some(from_list(length, "the model list's max_context_length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_max_context_length() {
        let body: Value = serde_json::from_str(r#"{"object":"list","data":[{"id":"mistral-medium-latest","object":"model","created":1756212345,"owned_by":"mistralai","capabilities":{"completion_chat":true,"completion_fim":false,"function_calling":true,"fine_tuning":false,"vision":true,"classification":false},"name":"mistral-medium-2508","description":"Our frontier-class multimodal model released August 2025.","max_context_length":131072,"aliases":["mistral-medium-2508"],"deprecation":null,"default_model_temperature":0.3,"type":"base"}]}"#).unwrap();
        assert_eq!(
            window(&body, "mistral-medium-latest").unwrap().tokens,
            131_072
        );
        assert_eq!(window(&body, "mistral-small-latest"), None);
    }
}
