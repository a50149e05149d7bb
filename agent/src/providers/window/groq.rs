//! Groq's `GET /openai/v1/models`: each model's `context_window`.

use serde_json::Value;

use super::reported::{entry, from_list, tokens, Reported};

/// The window of `model` in Groq's list.
pub(super) fn window(body: &Value, model: &str) -> Option<Reported> {
    let length = tokens(&entry(body, model)?["context_window"])?;
    Some(from_list(length, "the model list's context_window"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_context_window() {
        let body: Value = serde_json::from_str(r#"{"object":"list","data":[{"id":"llama-3.3-70b-versatile","object":"model","created":1733447754,"owned_by":"Meta","active":true,"context_window":131072,"public_apps":null,"max_completion_tokens":32768},{"id":"whisper-large-v3","object":"model","created":1693721698,"owned_by":"OpenAI","active":true,"context_window":448,"public_apps":null}]}"#).unwrap();
        assert_eq!(
            window(&body, "llama-3.3-70b-versatile").unwrap().tokens,
            131_072
        );
        assert_eq!(window(&body, "llama-3.1-8b-instant"), None);
    }
}
