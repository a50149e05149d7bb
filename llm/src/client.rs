//! `Client`: sends one model turn to `POST {base_url}/chat/completions` and streams it back,
//! retrying connect failures and transient statuses only while nothing was yielded yet.
//! Decoding the body is `stream.rs`'s job; request shape `request.rs`'s; the model list
//! `client/models.rs`'s.
//!
//! - `inner` — [`Inner`](inner::Inner): what every request is sent with, and the time limits of
//!   one wait.
//! - `answer` — an answer read: an error status, the events of a 2xx (SSE or a JSON answer),
//!   a small answer, each under a cap.
//! - `run` — one turn in progress: attempts, retries, the events passed on.
//! - `info` — [`Client::server_json`]; `models` — [`Client::list_models`].

mod answer;
pub(crate) mod info;
mod inner;
pub(crate) mod models;
mod run;

use std::fmt;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Url;
use serde_json::Value;

use crate::endpoint::display_url;
use crate::error::LlmError;
use crate::history::assistant_message;
use crate::provider::Provider;
use crate::redact::Secrets;
use crate::request::{chat_completions_url, ChatRequest, SharedChatRequest};
use crate::stream::TurnStream;
use crate::turn::Turn;
use inner::Inner;
use run::Run;

/// A client for one provider. Cheap to clone; share one per provider.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("provider", &self.inner.provider)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client with its own connection pool, using the provider's connect timeout.
    ///
    /// # Errors
    /// [`LlmError::InvalidConfig`] for a bad base URL, model, header or TLS setup.
    pub fn new(provider: Provider) -> Result<Self, LlmError> {
        let http = default_http(&provider)?;
        Client::with_http_client(provider, http)
    }

    /// A client over a caller-built `reqwest::Client` (its own timeouts then apply too).
    ///
    /// # Errors
    /// [`LlmError::InvalidConfig`] for a bad base URL, model or header.
    pub fn with_http_client(provider: Provider, http: reqwest::Client) -> Result<Self, LlmError> {
        if provider.model.trim().is_empty() {
            return Err(LlmError::InvalidConfig {
                detail: format!("no model given for {}", display_url(&provider.base_url)),
            });
        }
        Client::build(provider, http)
    }

    /// A client for a provider whose model is not chosen yet: it can
    /// [`list_models`](Client::list_models), and a turn with it fails with
    /// [`LlmError::InvalidRequest`] while `model` is empty.
    ///
    /// # Errors
    /// [`LlmError::InvalidConfig`] for a bad base URL, header or TLS setup.
    pub fn for_model_list(provider: Provider) -> Result<Self, LlmError> {
        let http = default_http(&provider)?;
        Client::build(provider, http)
    }

    fn build(provider: Provider, http: reqwest::Client) -> Result<Self, LlmError> {
        let url = chat_completions_url(&provider.base_url)?;
        let label = crate::endpoint::endpoint_host(&url);
        let headers = build_headers(&provider)?;
        let secrets = Secrets::of(&provider);
        Ok(Client {
            inner: Arc::new(Inner {
                provider,
                http,
                url,
                label,
                headers,
                secrets,
            }),
        })
    }

    /// The provider this client talks to.
    pub fn provider(&self) -> &Provider {
        &self.inner.provider
    }

    /// The full endpoint, `{base_url}/chat/completions`. Its query or user-info may hold a
    /// key: show it with [`crate::display_url`].
    pub fn endpoint(&self) -> &Url {
        &self.inner.url
    }

    /// Starts one model turn. Nothing is sent until the stream is first polled; dropping
    /// the stream cancels the turn and drops the connection.
    ///
    /// An invalid request (no model chosen, or messages that cannot be serialised) comes out
    /// as the stream's only item; a tool's name was checked when its [`ToolDefinition`] was
    /// made. The stream holds a copy of `request`'s messages: a caller that keeps its history
    /// shared uses [`Client::stream_shared`], which copies nothing.
    ///
    /// [`ToolDefinition`]: crate::ToolDefinition
    pub fn stream_turn(&self, request: &ChatRequest<'_>) -> TurnStream {
        self.stream_shared(SharedChatRequest::from(request))
    }

    /// [`Client::stream_turn`] for a request whose messages the caller shares. The body is
    /// written from `request` for each attempt and dropped once sent: a turn waiting for its
    /// provider keeps the history as the caller's values only, not also as text. The stream
    /// releases `request` when the answer's text begins (nothing is sent again) or the turn
    /// ends.
    pub fn stream_shared(&self, request: SharedChatRequest) -> TurnStream {
        let label = self.inner.label.clone();
        let run = Run::new(
            Arc::clone(&self.inner),
            self.check_model().map(|()| Some(request)),
        );
        let events = futures_util::stream::unfold(run, |mut run| async move {
            let item = run.next().await?;
            Some((item, run))
        });
        TurnStream::new(label, events)
    }

    /// A turn needs a model (a client made by [`Client::for_model_list`] may have none).
    fn check_model(&self) -> Result<(), LlmError> {
        if self.inner.provider.model.trim().is_empty() {
            return Err(LlmError::InvalidRequest {
                detail: format!(
                    "no model chosen for {}",
                    display_url(&self.inner.provider.base_url)
                ),
            });
        }
        Ok(())
    }

    /// The assistant message to append to the history for `turn`, with this provider's
    /// choice of empty content (see [`crate::history::assistant_message`]).
    pub fn assistant_message(&self, turn: &Turn) -> Value {
        assistant_message(turn, self.inner.provider.empty_content)
    }
}

/// An HTTP client with its own connection pool and the provider's connect time-out.
///
/// reqwest's own retries are off: it retries only HTTP/2 and HTTP/3 refusals, which an
/// HTTP/1 client never gets, yet its retry layer copied every request (headers, extensions)
/// in case it would. Retrying a model request is this crate's job (`retry.rs`).
fn default_http(provider: &Provider) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(provider.timeouts.connect)
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .user_agent(concat!("rojos-llm/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LlmError::InvalidConfig {
            detail: format!("cannot build the HTTP client: {e}"),
        })
}

fn build_headers(provider: &Provider) -> Result<HeaderMap, LlmError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    for (name, value) in &provider.headers {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| LlmError::InvalidConfig {
                detail: format!("header name {name:?} is not valid"),
            })?;
        let mut value = HeaderValue::from_str(value).map_err(|_| LlmError::InvalidConfig {
            detail: format!("the value of header {name} is not valid"),
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    if let Some(key) = &provider.api_key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                LlmError::InvalidConfig {
                    detail: "the API key contains characters not allowed in a header".into(),
                }
            })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}
