//! [`Client::list_models`]: `GET {base_url}/models`, the cheap check that a provider is
//! reachable, takes its key and offers a model, with the same headers, key and secret
//! scrubbing as a turn, a short overall time-out and a cap on the body. [`ModelList`] answers
//! whether a model is offered and which listed model can chat, with the services' quirks
//! named where they are handled (see [`ModelListDialect`]).

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::Url;
use serde::Deserialize;
use tokio::time::{Duration, Instant};

use super::Client;
use crate::dialect::ModelListDialect;
use crate::endpoint::display_url;
use crate::error::LlmError;

/// The longest a model list may take, connection included (the provider's connect time-out
/// applies within it).
pub const LIST_MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest model list read (OpenRouter's, with every model's description, is about 1 MiB).
const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;

/// The version header Anthropic's native endpoints require (docs.anthropic.com, "Versions").
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The model ids a provider listed, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelList {
    ids: Vec<String>,
    dialect: ModelListDialect,
}

#[derive(Deserialize)]
struct ListBody {
    data: Vec<ListEntry>,
}

#[derive(Deserialize)]
struct ListEntry {
    id: String,
}

impl ModelList {
    /// A list of `ids` as `dialect` lists them.
    pub fn new(ids: Vec<String>, dialect: ModelListDialect) -> ModelList {
        let ids = ids
            .into_iter()
            .map(|id| match dialect {
                // Gemini: `models/gemini-2.5-flash` is requested as `gemini-2.5-flash`.
                ModelListDialect::Gemini => {
                    id.strip_prefix("models/").map_or(id.clone(), str::to_owned)
                }
                _ => id,
            })
            .collect();
        ModelList { ids, dialect }
    }

    /// The ids, as requests name them.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Whether `model` is offered: listed as it is, or as a dated snapshot of it (Anthropic
    /// and OpenAI list `NAME-20250929` or `NAME-2025-04-14` for the alias `NAME`), or, for
    /// Ollama, as `NAME:latest`.
    pub fn offers(&self, model: &str) -> bool {
        self.ids.iter().any(|id| {
            id == model
                || is_dated_snapshot(id, model)
                || (self.dialect == ModelListDialect::Ollama
                    && !model.contains(':')
                    && id.strip_suffix(":latest") == Some(model))
        })
    }

    /// The first listed model that can chat: embedding and reranking models (named so by
    /// every local server: `nomic-embed-text`, `text-embedding-…`, `bge-m3`, `all-minilm`)
    /// are skipped.
    pub fn first_chat_model(&self) -> Option<&str> {
        self.ids
            .iter()
            .map(String::as_str)
            .find(|id| is_chat_model(id))
    }
}

/// Whether `id` is `model` followed by a date: `-YYYYMMDD` or `-YYYY-MM-DD`.
fn is_dated_snapshot(id: &str, model: &str) -> bool {
    let Some(date) = id
        .strip_prefix(model)
        .and_then(|rest| rest.strip_prefix('-'))
    else {
        return false;
    };
    let digits: String = date.chars().filter(|c| *c != '-').collect();
    digits.len() == 8
        && digits.chars().all(|c| c.is_ascii_digit())
        && (date.len() == 8 || date.len() == 10)
}

/// Whether a listed model is one that can chat, judged by its name.
fn is_chat_model(id: &str) -> bool {
    const NOT_CHAT: [&str; 5] = ["embed", "rerank", "minilm", "bge-", "whisper"];
    let id = id.to_ascii_lowercase();
    !NOT_CHAT.iter().any(|word| id.contains(word))
}

/// `{base_url}/models`, keeping any query (Gemini's `?key=`).
pub(crate) fn models_url(base_url: &str) -> Result<Url, LlmError> {
    let mut url = crate::request::chat_completions_url(base_url)?;
    let path = url.path().trim_end_matches("/chat/completions").to_owned();
    url.set_path(&format!("{path}/models"));
    Ok(url)
}

impl Client {
    /// Lists the provider's models: `GET {base_url}/models`, within
    /// [`LIST_MODELS_TIMEOUT`], never retried (the caller checks again later).
    ///
    /// # Errors
    ///
    /// [`LlmError::Connect`] when the provider cannot be reached, [`LlmError::Status`] for
    /// an HTTP error (401 for a refused key), [`LlmError::IdleTimeout`] when it does not
    /// answer in time, [`LlmError::Malformed`] for a body that is not a model list, and
    /// [`LlmError::TooLarge`] for one past 8 MiB.
    pub async fn list_models(&self) -> Result<ModelList, LlmError> {
        let deadline = Instant::now() + LIST_MODELS_TIMEOUT;
        let result = self.fetch_models(deadline).await;
        result.map_err(|e| self.inner.secrets.scrub_error(e))
    }

    async fn fetch_models(&self, deadline: Instant) -> Result<ModelList, LlmError> {
        let inner = &self.inner;
        let provider = &inner.provider;
        let mut url = models_url(&provider.base_url)?;
        let mut headers = inner.headers.clone();
        headers.remove(CONTENT_TYPE);
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if provider.model_list == ModelListDialect::Anthropic {
            // Anthropic: its native `/v1/models` wants the key in `x-api-key`, a version
            // header, and a `limit` (20 a page by default, 1000 at most).
            if let Some(key) = &provider.api_key {
                let mut value =
                    HeaderValue::from_str(key.expose()).map_err(|_| LlmError::InvalidConfig {
                        detail: "the API key contains characters not allowed in a header".into(),
                    })?;
                value.set_sensitive(true);
                headers.insert("x-api-key", value);
            }
            headers.insert(
                "anthropic-version",
                HeaderValue::from_static(ANTHROPIC_VERSION),
            );
            url.query_pairs_mut().append_pair("limit", "1000");
        }
        tracing::debug!(provider = %inner.label, url = %display_url(url.as_str()), "listing models");
        let send = inner.http.get(url).headers(headers);
        let answer = inner
            .small_answer(send, MAX_LIST_BYTES, deadline, || self.list_timeout())
            .await?;
        let body: ListBody = serde_json::from_slice(&answer).map_err(|e| LlmError::Malformed {
            provider: inner.label.clone(),
            detail: format!("the model list is unreadable: {e}"),
        })?;
        let ids = body.data.into_iter().map(|entry| entry.id).collect();
        Ok(ModelList::new(ids, provider.model_list))
    }

    fn list_timeout(&self) -> LlmError {
        LlmError::IdleTimeout {
            provider: self.inner.label.clone(),
            after: LIST_MODELS_TIMEOUT,
        }
    }
}

#[cfg(test)]
mod tests;
