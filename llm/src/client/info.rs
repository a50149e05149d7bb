//! [`Client::server_json`]: one small JSON request to the provider's server besides the
//! chat (a model's details, what it has loaded, a model list with lengths), with the same
//! headers, key and secret scrubbing as a turn, a caller's time limit and a cap on the body.
//! What the answer means is the caller's business.

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::Url;
use serde_json::Value;
use tokio::time::{Duration, Instant};

use super::Client;
use crate::endpoint::display_url;
use crate::error::LlmError;

/// The largest answer read (OpenRouter's model list, with every description, is about 1 MiB).
const MAX_INFO_BYTES: usize = 8 * 1024 * 1024;

/// Where a request of [`Client::server_json`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPath<'a> {
    /// Beside `/chat/completions`: `{base_url}/PATH` (`models`).
    Api(&'a str),
    /// At the server's root: `base_url` without its `/v1`, then `/PATH` (Ollama's
    /// `api/show`, LM Studio's `api/v0/models`).
    Root(&'a str),
}

/// The URL `path` names on the server of `base_url` (its query kept).
///
/// # Errors
///
/// [`LlmError::InvalidConfig`] for a base URL that is not one.
pub fn server_url(base_url: &str, path: ServerPath<'_>) -> Result<Url, LlmError> {
    let mut url = crate::request::chat_completions_url(base_url)?;
    let api = url.path().trim_end_matches("/chat/completions").to_owned();
    let full = match path {
        ServerPath::Api(path) => format!("{api}/{path}"),
        ServerPath::Root(path) => {
            let root = api.strip_suffix("/v1").unwrap_or(&api);
            format!("{root}/{path}")
        }
    };
    url.set_path(&full);
    Ok(url)
}

impl Client {
    /// `GET` (or, with `body`, `POST`) `path` on the provider's server and reads the JSON
    /// answer, all within `limit`; never retried.
    ///
    /// # Errors
    ///
    /// [`LlmError::Connect`], [`LlmError::Status`], [`LlmError::IdleTimeout`] past `limit`,
    /// [`LlmError::Malformed`] for an answer that is not JSON, [`LlmError::TooLarge`] past
    /// 8 MiB.
    pub async fn server_json(
        &self,
        path: ServerPath<'_>,
        body: Option<&Value>,
        limit: Duration,
    ) -> Result<Value, LlmError> {
        let deadline = Instant::now() + limit;
        let result = self.fetch_info(path, body, deadline, limit).await;
        result.map_err(|e| self.inner.secrets.scrub_error(e))
    }

    async fn fetch_info(
        &self,
        path: ServerPath<'_>,
        body: Option<&Value>,
        deadline: Instant,
        limit: Duration,
    ) -> Result<Value, LlmError> {
        let inner = &self.inner;
        let url = server_url(&inner.provider.base_url, path)?;
        let mut headers = inner.headers.clone();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        tracing::debug!(provider = %inner.label, url = %display_url(url.as_str()), "asking the provider");
        let request = match body {
            Some(body) => inner.http.post(url).headers(headers).json(body),
            None => {
                headers.remove(CONTENT_TYPE);
                inner.http.get(url).headers(headers)
            }
        };
        let timeout = || LlmError::IdleTimeout {
            provider: inner.label.clone(),
            after: limit,
        };
        let body = inner
            .small_answer(request, MAX_INFO_BYTES, deadline, timeout)
            .await?;
        serde_json::from_slice(&body).map_err(|e| LlmError::Malformed {
            provider: inner.label.clone(),
            detail: format!("the answer is not JSON: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_beside_the_chat_or_to_the_servers_root() {
        let at = |base: &str, path| server_url(base, path).unwrap().to_string();
        assert_eq!(
            at("http://127.0.0.1:11434/v1", ServerPath::Root("api/show")),
            "http://127.0.0.1:11434/api/show"
        );
        assert_eq!(
            at("http://h:1234/proxy/v1/", ServerPath::Root("api/v0/models")),
            "http://h:1234/proxy/api/v0/models"
        );
        assert_eq!(
            at("https://openrouter.ai/api/v1", ServerPath::Api("models")),
            "https://openrouter.ai/api/v1/models"
        );
        assert_eq!(
            at(
                "https://g.example/v1beta/openai?key=k",
                ServerPath::Api("models")
            ),
            "https://g.example/v1beta/openai/models?key=k"
        );
    }
}
