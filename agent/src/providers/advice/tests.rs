//! The sentence for each kind of failure, pinned, for providers declared by kind and without
//! one. The e2e tests (`host/tests/e2e/provider_errors.rs`) check the same through a chat.

use std::time::Duration;

use rojos_llm::{LlmError, ProviderKind};

use super::*;

fn by_kind(kind: ProviderKind, model: &str) -> ProviderRef {
    let host = rojos_llm::chat_completions_url(kind.base_url())
        .map(|url| rojos_llm::endpoint_host(&url))
        .expect("a kind's URL");
    ProviderRef {
        name: kind.name().to_owned(),
        kind: Some(kind),
        host,
        model: model.to_owned(),
        key_env: kind.api_key_env().map(str::to_owned),
    }
}

fn status(code: u16, message: &str, codes: &[&str]) -> LlmError {
    LlmError::Status {
        provider: "h".into(),
        code,
        message: message.into(),
        codes: codes.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn refused() -> LlmError {
    LlmError::Connect {
        provider: "h".into(),
        source: Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )),
    }
}

#[test]
fn a_local_server_not_running_says_how_to_start_it() {
    assert_eq!(
        for_error(&by_kind(ProviderKind::Ollama, ""), &refused()),
        "Ollama is not running at 127.0.0.1:11434: start it with `ollama serve` and pull a \
         model with tool support (`ollama pull qwen2.5:7b`), or set another provider in rojos.toml"
    );
    let unnamed = ProviderRef {
        name: "box".into(),
        kind: None,
        host: "localhost:9000".into(),
        model: "m".into(),
        key_env: None,
    };
    assert_eq!(
        for_error(&unnamed, &refused()),
        "box is not running at localhost:9000: start it, or check `base_url` in [providers.box]"
    );
    assert_eq!(
        for_error(&by_kind(ProviderKind::OpenAi, "gpt-4.1-mini"), &refused()),
        "OpenAI cannot be reached at api.openai.com: check the network connection and \
         `base_url` in [providers.openai], or set another provider in rojos.toml"
    );
}

#[test]
fn key_model_rate_credit_and_context_failures_name_the_fix() {
    let openai = by_kind(ProviderKind::OpenAi, "gpt-5-mini");
    assert_eq!(
        for_error(
            &openai,
            &status(401, "Incorrect API key provided", &["invalid_api_key"])
        ),
        "OpenAI refused the API key in OPENAI_API_KEY: check the key, or set another provider \
         in rojos.toml"
    );
    assert_eq!(
        for_error(
            &openai,
            &status(
                404,
                "The model `gpt-5-mini` does not exist",
                &["model_not_found"]
            )
        ),
        "OpenAI has no model gpt-5-mini: set `model` in [providers.openai] to one it offers"
    );
    assert_eq!(
        for_error(
            &by_kind(ProviderKind::Ollama, "qwen2.5:7b"),
            &status(
                404,
                "model \"qwen2.5:7b\" not found, try pulling it first",
                &["api_error"]
            )
        ),
        "Ollama has no model qwen2.5:7b: pull it with `ollama pull qwen2.5:7b`, or set `model` \
         in [providers.ollama] to one it has"
    );
    assert_eq!(
        for_error(
            &by_kind(ProviderKind::Groq, "llama-3.3-70b-versatile"),
            &status(429, "Rate limit reached", &["rate_limit_exceeded"])
        ),
        "Groq is rate limiting requests: wait a minute and send the message again"
    );
    assert_eq!(
        for_error(
            &openai,
            &status(
                429,
                "You exceeded your current quota",
                &["insufficient_quota"]
            )
        ),
        "OpenAI says the account is out of quota or credit: add credit in its billing settings, \
         or set another provider in rojos.toml"
    );
    assert_eq!(
        for_error(
            &by_kind(ProviderKind::Ollama, "qwen2.5:7b"),
            &status(400, "the input length exceeds the context length", &[])
        ),
        "The conversation is too long for qwen2.5:7b's context: start a new conversation"
    );
}

#[test]
fn other_failures_keep_the_providers_words_without_html() {
    let anthropic = by_kind(ProviderKind::Anthropic, "claude-sonnet-4-5");
    assert_eq!(
        for_error(
            &anthropic,
            &status(529, "Overloaded", &["overloaded_error"])
        ),
        "Anthropic failed on its side (HTTP 529: \"Overloaded\"): wait a moment and send the \
         message again, or set another provider in rojos.toml"
    );
    assert_eq!(
        for_error(
            &anthropic,
            &status(502, "<html><h1>502 Bad Gateway</h1></html>", &[])
        ),
        "Anthropic failed on its side (HTTP 502): wait a moment and send the message again, or \
         set another provider in rojos.toml"
    );
    assert_eq!(
        for_error(
            &anthropic,
            &status(
                400,
                "messages.1.content: field required.",
                &["invalid_request_error"]
            )
        ),
        "Anthropic refused the request (HTTP 400: \"messages.1.content: field required\"): if it \
         happens again, set another model or provider in rojos.toml"
    );
    let long = "x".repeat(500);
    let sentence = for_error(&anthropic, &status(400, &long, &[]));
    assert!(
        sentence.contains(&format!("\"{}…\"", "x".repeat(200))),
        "{sentence}"
    );
}

#[test]
fn stream_failures_say_what_happened_and_which_setting_to_raise() {
    let lm = by_kind(ProviderKind::LmStudio, "");
    assert_eq!(
        for_error(
            &lm,
            &LlmError::IdleTimeout {
                provider: "h".into(),
                after: Duration::from_secs(60)
            }
        ),
        "LM Studio sent nothing for 60s: send the message again, or raise `idle_timeout_secs` in \
         [providers.lmstudio]"
    );
    assert_eq!(
        for_error(
            &lm,
            &LlmError::EmptyTurn {
                provider: "h".into(),
                received: "3 chunks with no choices, then [DONE]".into()
            }
        ),
        "LM Studio ended the turn without an answer (3 chunks with no choices, then [DONE]): \
         send the message again, or set another `model` in [providers.lmstudio]"
    );
    assert_eq!(
        for_error(
            &lm,
            &LlmError::LengthBeforeOutput {
                provider: "h".into()
            }
        ),
        "LM Studio's model reached its token limit before writing an answer, most likely because \
         the conversation fills its context: start a new conversation"
    );
    assert_eq!(
        for_error(
            &by_kind(ProviderKind::Vllm, "m"),
            &status(
                400,
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                &["BadRequestError"]
            )
        ),
        "vLLM at 127.0.0.1:8000 was started without tool calling: start it with `vllm serve \
         MODEL --enable-auto-tool-choice --tool-call-parser PARSER`"
    );
}
