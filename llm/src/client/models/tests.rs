//! `ModelList` matching and `Client::list_models` against a real HTTP server on loopback.

use std::sync::{Arc, Mutex};

use axum::{http::HeaderMap, routing::get, Json, Router};
use serde_json::{json, Value};

use super::*;
use crate::{Provider, ProviderKind};

fn list(ids: &[&str], dialect: ModelListDialect) -> ModelList {
    ModelList::new(ids.iter().map(|s| (*s).to_owned()).collect(), dialect)
}

#[test]
fn a_model_is_offered_as_listed_as_a_dated_snapshot_or_as_ollamas_latest() {
    let anthropic = list(&["claude-sonnet-4-5-20250929"], ModelListDialect::Anthropic);
    assert!(anthropic.offers("claude-sonnet-4-5"));
    assert!(!anthropic.offers("claude-sonnet-4"));
    let openai = list(&["gpt-4.1-mini-2025-04-14"], ModelListDialect::OpenAi);
    assert!(openai.offers("gpt-4.1-mini"));
    assert!(!openai.offers("gpt-4.1"));
    let ollama = list(&["qwen2.5:latest", "llama3.1:8b"], ModelListDialect::Ollama);
    assert!(ollama.offers("qwen2.5"));
    assert!(ollama.offers("llama3.1:8b"));
    assert!(!ollama.offers("llama3.1"));
    assert!(!list(&["qwen2.5:latest"], ModelListDialect::OpenAi).offers("qwen2.5"));
}

#[test]
fn gemini_ids_lose_their_models_prefix() {
    let gemini = list(&["models/gemini-2.5-flash"], ModelListDialect::Gemini);
    assert_eq!(gemini.ids(), ["gemini-2.5-flash"]);
    assert!(gemini.offers("gemini-2.5-flash"));
}

#[test]
fn the_first_chat_model_skips_embedding_models() {
    let models = list(
        &[
            "nomic-embed-text:latest",
            "text-embedding-nomic-embed-text-v1.5",
            "bge-m3",
            "qwen2.5:7b",
        ],
        ModelListDialect::Ollama,
    );
    assert_eq!(models.first_chat_model(), Some("qwen2.5:7b"));
    assert_eq!(
        list(&["all-minilm"], ModelListDialect::OpenAi).first_chat_model(),
        None
    );
}

#[test]
fn the_models_url_keeps_the_query() {
    assert_eq!(
        models_url("https://h/v1beta/openai/?key=k")
            .unwrap()
            .as_str(),
        "https://h/v1beta/openai/models?key=k"
    );
    assert_eq!(
        models_url("http://h:1/v1").unwrap().as_str(),
        "http://h:1/v1/models"
    );
}

/// The headers and query of each request a test server received.
type Seen = Arc<Mutex<Vec<(HeaderMap, String)>>>;

/// A `GET /v1/models` on loopback answering `status` and `body`, recording each request.
async fn serve(status: u16, body: Value) -> (String, Seen) {
    let seen = Seen::default();
    let record = Arc::clone(&seen);
    let app = Router::new().route(
        "/v1/models",
        get(move |headers: HeaderMap, uri: axum::http::Uri| async move {
            let query = uri.query().unwrap_or("").to_owned();
            record.lock().unwrap().push((headers, query));
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                Json(body),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn the_list_is_read_with_the_key_and_anthropic_gets_its_headers() {
    let (url, seen) = serve(200, json!({"data": [{"id": "claude-sonnet-4-5-20250929"}]})).await;
    let mut provider = Provider::new(url, "claude-sonnet-4-5").with_api_key("sk-ant-secret");
    ProviderKind::Anthropic.apply_quirks(&mut provider);
    let models = Client::new(provider).unwrap().list_models().await.unwrap();
    assert!(models.offers("claude-sonnet-4-5"));
    let (headers, query) = seen.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], "Bearer sk-ant-secret");
    assert_eq!(headers["x-api-key"], "sk-ant-secret");
    assert_eq!(headers["anthropic-version"], ANTHROPIC_VERSION);
    assert_eq!(query, "limit=1000");
}

#[tokio::test]
async fn a_refused_key_is_a_status_error_without_the_key() {
    let (url, _) = serve(401, json!({"error": {"message": "bad key sk-secret-123"}})).await;
    let provider = Provider::new(url, "m").with_api_key("sk-secret-123");
    let error = Client::new(provider)
        .unwrap()
        .list_models()
        .await
        .unwrap_err();
    assert_eq!(error.status_code(), Some(401));
    assert!(!error.to_string().contains("sk-secret-123"), "{error}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_and_a_client_without_model_can_list() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let client = Client::for_model_list(Provider::new(url, "")).unwrap();
    let error = client.list_models().await.unwrap_err();
    assert_eq!(error.kind(), "connect", "{error}");
}
