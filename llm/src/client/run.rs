//! [`Run`]: one turn in progress. It sends the request, retries connect failures, transient
//! statuses and retryable in-stream errors while nothing was yielded yet, then passes on the
//! events of the answer's [`Source`] and ends the turn with its secrets scrubbed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{sleep, timeout_at, Instant};

use super::answer::Source;
use super::inner::Inner;
use crate::error::LlmError;
use crate::request::{body_text, SharedChatRequest};
use crate::retry;
use crate::turn::TurnEvent;

/// One turn in progress: attempts, the chosen source, and whether output was yielded.
pub(super) struct Run {
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
    /// A turn not started yet: `request` is what each attempt's body is written from, or the
    /// error the turn yields once.
    pub(super) fn new(
        inner: Arc<Inner>,
        request: Result<Option<SharedChatRequest>, LlmError>,
    ) -> Run {
        Run {
            inner,
            request,
            deadline: None,
            attempts: 0,
            source: None,
            yielded: false,
            done: false,
        }
    }

    /// The turn's next event, `None` once it ended.
    pub(super) async fn next(&mut self) -> Option<Result<TurnEvent, LlmError>> {
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

/// A request error is yielded once; the stream ends right after.
fn clone_request_error(e: &LlmError) -> LlmError {
    LlmError::InvalidRequest {
        detail: match e {
            LlmError::InvalidRequest { detail } => detail.clone(),
            other => other.to_string(),
        },
    }
}
