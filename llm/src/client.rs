//! `Client`: sends one model turn to `POST {base_url}/chat/completions` and streams it back,
//! retrying connect failures and transient statuses only while nothing was yielded yet.
//! Decoding the body is `stream.rs`'s job; request shape `request.rs`'s; the model list
//! `client/models.rs`'s.

pub(crate) mod info;
pub(crate) mod models;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Response, Url};
use serde_json::Value;
use tokio::time::{sleep, timeout_at, Instant};

use crate::assemble::{Assembler, Ending, PushError};
use crate::endpoint::display_url;
use crate::error::{LlmError, SizeLimit};
use crate::history::assistant_message;
use crate::provider::Provider;
use crate::redact::Secrets;
use crate::request::{body_text, chat_completions_url, ChatRequest, SharedChatRequest};
use crate::retry;
use crate::sse;
use crate::stream::{no_output_error, DecodeOptions, Decoder, TurnStream};
use crate::turn::{Turn, TurnEvent};
use crate::wire::{describe_error_body, Chunk, ErrorInfo};

/// A client for one provider. Cheap to clone; share one per provider.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    provider: Provider,
    http: reqwest::Client,
    url: Url,
    /// `host[:port]`, the provider's name in errors and logs.
    label: String,
    headers: HeaderMap,
    /// Scrubbed from the provider's own words before they reach an error or a log.
    secrets: Secrets,
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
        let run = Run {
            inner: Arc::clone(&self.inner),
            request: self.check_model().map(|()| Some(request)),
            deadline: None,
            attempts: 0,
            source: None,
            yielded: false,
            done: false,
        };
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

/// Where a turn's events come from once the provider answered.
enum Source {
    /// An SSE body.
    Sse(Box<Decoder>),
    /// Events already decoded (a non-streamed JSON answer).
    Ready(VecDeque<Result<TurnEvent, LlmError>>),
}

/// One turn in progress: attempts, the chosen source, and whether output was yielded.
struct Run {
    inner: Arc<Inner>,
    /// What each attempt's body is written from; `Ok(None)` once nothing will be sent again.
    request: Result<Option<SharedChatRequest>, LlmError>,
    deadline: Option<Instant>,
    attempts: u32,
    source: Option<Source>,
    /// A text delta reached the caller: from now on nothing is retried.
    yielded: bool,
    done: bool,
}

impl Run {
    async fn next(&mut self) -> Option<Result<TurnEvent, LlmError>> {
        if self.done {
            return None;
        }
        let turn_limit = self.inner.provider.timeouts.turn;
        let deadline = *self
            .deadline
            .get_or_insert_with(|| Instant::now() + turn_limit);
        loop {
            if self.source.is_none() {
                match self.open(deadline).await {
                    Ok(source) => self.source = Some(source),
                    Err(e) => return Some(self.end(Err(e))),
                }
            }
            let item = match self.source.as_mut() {
                Some(Source::Sse(decoder)) => decoder.next().await,
                Some(Source::Ready(queue)) => queue.pop_front(),
                None => None,
            };
            match item {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Ok(TurnEvent::TextDelta(text))) => {
                    if !self.yielded {
                        self.yielded = true;
                        // Nothing is sent again from now on: the request (the whole
                        // history) is not held while the rest of the answer streams.
                        self.request = Ok(None);
                    }
                    return Some(Ok(TurnEvent::TextDelta(text)));
                }
                // Live status only: a retry after it starts the calls over (same indexes).
                Some(Ok(
                    status @ (TurnEvent::ToolCallStarted { .. }
                    | TurnEvent::ToolCallProgress { .. }),
                )) => return Some(Ok(status)),
                Some(Ok(finished)) => return Some(self.end(Ok(finished))),
                Some(Err(e)) => {
                    if !self.yielded && retry::in_stream_error_is_retryable(&e) {
                        if let Some(wait) = self.next_wait(None, deadline) {
                            self.log_retry(&e, wait);
                            self.source = None;
                            sleep(wait).await;
                            continue;
                        }
                    }
                    return Some(self.end(Err(e)));
                }
            }
        }
    }

    fn end(&mut self, item: Result<TurnEvent, LlmError>) -> Result<TurnEvent, LlmError> {
        self.done = true;
        self.source = None;
        self.request = Ok(None);
        item.map_err(|e| self.inner.secrets.scrub_error(e))
    }

    /// Sends the request until the provider answers 2xx, retrying what may be retried.
    async fn open(&mut self, deadline: Instant) -> Result<Source, LlmError> {
        loop {
            let body = self.body()?;
            self.attempts += 1;
            tracing::debug!(provider = %self.inner.label, attempt = self.attempts, "sending model request");
            let send = self
                .inner
                .http
                .post(self.inner.url.clone())
                .headers(self.inner.headers.clone())
                .body(body)
                .send();
            let response = match timeout_at(self.inner.wait_limit(deadline), send).await {
                Err(_) => return Err(self.inner.timeout_error(deadline)),
                Ok(Ok(response)) => response,
                Ok(Err(e)) => {
                    let error = LlmError::Connect {
                        provider: self.inner.label.clone(),
                        source: Box::new(e.without_url()),
                    };
                    match self.next_wait(None, deadline) {
                        Some(wait) => {
                            self.log_retry(&error, wait);
                            sleep(wait).await;
                            continue;
                        }
                        None => return Err(error),
                    }
                }
            };
            if response.status().is_success() {
                return Arc::clone(&self.inner).source_for(response, deadline).await;
            }
            let (error, retryable, hint) = Arc::clone(&self.inner)
                .status_error(response, deadline)
                .await;
            if retryable {
                if let Some(wait) = self.next_wait(hint, deadline) {
                    self.log_retry(&error, wait);
                    sleep(wait).await;
                    continue;
                }
            }
            return Err(error);
        }
    }

    /// The next attempt's body, written from the request.
    fn body(&self) -> Result<Bytes, LlmError> {
        let request = match &self.request {
            Ok(Some(request)) => request,
            // Not reached: a request is sent again only before the answer's text begins.
            Ok(None) => {
                return Err(LlmError::InvalidRequest {
                    detail: "the turn's request was already answered".to_owned(),
                })
            }
            Err(e) => return Err(clone_request_error(e)),
        };
        body_text(&self.inner.provider, &request.as_request())
            .map(Bytes::from)
            .map_err(|e| LlmError::InvalidRequest {
                detail: format!("messages cannot be serialised: {e}"),
            })
    }

    /// The wait before the next attempt, or `None` when attempts or time are used up.
    fn next_wait(&self, hint: Option<Duration>, deadline: Instant) -> Option<Duration> {
        let policy = &self.inner.provider.retry;
        if self.attempts >= policy.max_attempts {
            return None;
        }
        let wait = hint.unwrap_or_else(|| retry::backoff(policy, self.attempts, fastrand::f64()));
        (Instant::now() + wait < deadline).then_some(wait)
    }

    fn log_retry(&self, error: &LlmError, wait: Duration) {
        let error = self.inner.secrets.scrub(&error.to_string());
        tracing::warn!(
            provider = %self.inner.label,
            attempt = self.attempts,
            wait_ms = wait.as_millis() as u64,
            error = %error,
            "model request failed; retrying"
        );
    }
}

impl Inner {
    /// Sends `request` and reads its successful answer whole, at most `max_bytes`, by
    /// `deadline` (`timeout` makes the error when it passes): a model list and
    /// [`Client::server_json`] read their small answers this way.
    async fn small_answer(
        &self,
        request: reqwest::RequestBuilder,
        max_bytes: usize,
        deadline: Instant,
        timeout: impl Fn() -> LlmError,
    ) -> Result<Vec<u8>, LlmError> {
        let response = match timeout_at(deadline, request.send()).await {
            Err(_) => return Err(timeout()),
            Ok(Err(e)) => {
                return Err(LlmError::Connect {
                    provider: self.label.clone(),
                    source: Box::new(e.without_url()),
                })
            }
            Ok(Ok(response)) => response,
        };
        if !response.status().is_success() {
            let (error, _, _) = self.status_error(response, deadline).await;
            return Err(error);
        }
        let capped = read_capped(response, max_bytes, deadline)
            .await
            .map_err(|e| match e {
                ReadError::Timeout => timeout(),
                ReadError::Transport(source) => LlmError::StreamCut {
                    provider: self.label.clone(),
                    source: Some(Box::new(source)),
                },
            })?;
        if capped.cut {
            return Err(LlmError::TooLarge {
                provider: self.label.clone(),
                limit: SizeLimit::Response { max_bytes },
            });
        }
        Ok(capped.body)
    }
}

impl Inner {
    /// Reads an error answer: the error, whether to retry, and the provider's requested wait.
    async fn status_error(
        &self,
        response: Response,
        deadline: Instant,
    ) -> (LlmError, bool, Option<Duration>) {
        let code = response.status().as_u16();
        let headers = response.headers().clone();
        let limit = self.provider.limits.max_error_body_bytes;
        let body = read_capped(response, limit, self.wait_limit(deadline))
            .await
            .map(|capped| capped.body)
            .unwrap_or_default();
        let info = describe_error_body(code, &String::from_utf8_lossy(&body));
        let quota = retry::is_quota_error(&info);
        let retryable =
            retry::status_is_retryable(code) && !quota && !retry::provider_vetoes_retry(&headers);
        let hint = retry::retry_after(&headers, self.provider.retry.max_retry_after);
        let error = LlmError::Status {
            provider: self.label.clone(),
            code,
            message: info.message,
            codes: info.tags,
        };
        (error, retryable, hint)
    }

    /// An SSE decoder, or (for a server that ignored `"stream": true`) the decoded JSON answer.
    async fn source_for(&self, response: Response, deadline: Instant) -> Result<Source, LlmError> {
        let provider = &self.provider;
        let options = DecodeOptions {
            provider: self.label.clone(),
            idle_timeout: Some(provider.timeouts.idle),
            turn_timeout: None,
            limits: provider.limits,
        };
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .trim_start()
            .to_ascii_lowercase();
        // A web page at the URL (a wrong `base_url`, a login portal) answers 200 with HTML,
        // which SSE parsing would read as an empty stream.
        if content_type.starts_with("text/html") {
            return Err(LlmError::Malformed {
                provider: self.label.clone(),
                detail: "the answer is an HTML page (content-type text/html), not a Chat \
                         Completions stream"
                    .into(),
            });
        }
        if !content_type.starts_with("application/json") {
            let frames = sse::frames(response.bytes_stream(), &provider.limits);
            let turn = Some((deadline, provider.timeouts.turn));
            return Ok(Source::Sse(Box::new(Decoder::new(frames, &options, turn))));
        }
        // The whole answer is one event: it gets the event cap.
        let limit = provider.limits.max_event_bytes();
        let capped = read_capped(response, limit, self.wait_limit(deadline))
            .await
            .map_err(|e| match e {
                ReadError::Timeout => self.timeout_error(deadline),
                ReadError::Transport(source) => LlmError::StreamCut {
                    provider: self.label.clone(),
                    source: Some(Box::new(source)),
                },
            })?;
        if capped.cut {
            return Err(LlmError::TooLarge {
                provider: self.label.clone(),
                limit: SizeLimit::Event {
                    max_bytes: limit,
                    max_turn_bytes: provider.limits.max_turn_bytes,
                },
            });
        }
        Ok(Source::Ready(self.decode_json(&capped.body)))
    }

    fn decode_json(&self, body: &[u8]) -> VecDeque<Result<TurnEvent, LlmError>> {
        let label = self.label.clone();
        let mut events = VecDeque::new();
        let chunk = match serde_json::from_slice::<Chunk>(body) {
            Ok(chunk) => chunk,
            Err(e) => {
                events.push_back(Err(LlmError::Malformed {
                    provider: label,
                    detail: format!("the JSON answer is unreadable: {e}"),
                }));
                return events;
            }
        };
        let limits = &self.provider.limits;
        let mut assembler = Assembler::new(limits.max_argument_bytes, limits.max_turn_bytes);
        match assembler.push(chunk) {
            Ok(text) => {
                if let Some(text) = text {
                    events.push_back(Ok(TurnEvent::TextDelta(text)));
                }
                let mut status = VecDeque::new();
                assembler.drain_tool_events(&mut status);
                events.extend(status.into_iter().map(Ok));
                let turn = assembler
                    .finish_checked(Ending::Json)
                    .map(TurnEvent::Finished)
                    .map_err(|nothing| no_output_error(&label, nothing));
                events.push_back(turn);
            }
            Err(PushError::Provider(ErrorInfo { message, code, .. })) => {
                events.push_back(Err(LlmError::Provider {
                    provider: label,
                    message,
                    code,
                }));
            }
            Err(PushError::TurnTooLarge) => events.push_back(Err(LlmError::TooLarge {
                provider: label,
                limit: SizeLimit::Turn {
                    max_bytes: limits.max_turn_bytes,
                },
            })),
        }
        events
    }

    /// How long to wait for the provider's next sign of life.
    fn wait_limit(&self, deadline: Instant) -> Instant {
        (Instant::now() + self.provider.timeouts.idle).min(deadline)
    }

    fn timeout_error(&self, deadline: Instant) -> LlmError {
        let timeouts = &self.provider.timeouts;
        if Instant::now() >= deadline {
            LlmError::TurnTimeout {
                provider: self.label.clone(),
                after: timeouts.turn,
            }
        } else {
            LlmError::IdleTimeout {
                provider: self.label.clone(),
                after: timeouts.idle,
            }
        }
    }
}

/// A request error is yielded once; the stream ends right after.
fn clone_request_error(e: &LlmError) -> LlmError {
    LlmError::InvalidRequest {
        detail: match e {
            LlmError::InvalidRequest { detail } => detail.clone(),
            other => other.to_string(),
        },
    }
}

enum ReadError {
    Timeout,
    Transport(reqwest::Error),
}

/// The start of a body.
struct Capped {
    /// At most the limit's worth of bytes.
    body: Vec<u8>,
    /// The body went on past the limit; the rest was not read.
    cut: bool,
}

/// Reads at most `limit` bytes of a body (the rest is not read), giving up at `until`.
async fn read_capped(
    mut response: Response,
    limit: usize,
    until: Instant,
) -> Result<Capped, ReadError> {
    let mut body = Vec::new();
    loop {
        match timeout_at(until, response.chunk()).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Transport(e.without_url())),
            Ok(Ok(None)) => return Ok(Capped { body, cut: false }),
            Ok(Ok(Some(chunk))) => {
                let room = limit.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if chunk.len() > room {
                    return Ok(Capped { body, cut: true });
                }
            }
        }
    }
}
