//! What the provider answered: an error status read into an [`LlmError`] (whether to retry,
//! the wait it asks for), a 2xx answer turned into a [`Source`] of events (an SSE decoder, or
//! a JSON answer from a server that ignored `"stream": true`, decoded whole), and the small
//! answers of the model list and the server's JSON; every body read under a cap.

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use reqwest::Response;
use tokio::time::{timeout_at, Instant};

use super::inner::Inner;
use crate::assemble::{Assembler, Ending, PushError};
use crate::error::{LlmError, SizeLimit};
use crate::retry;
use crate::sse;
use crate::stream::{no_output_error, DecodeOptions, Decoder};
use crate::turn::TurnEvent;
use crate::wire::{describe_error_body, Chunk, ErrorInfo};

/// Where a turn's events come from once the provider answered.
pub(super) enum Source {
    /// An SSE body.
    Sse(Box<Decoder>),
    /// Events already decoded (a non-streamed JSON answer).
    Ready(VecDeque<Result<TurnEvent, LlmError>>),
}

impl Inner {
    /// Sends `request` and reads its successful answer whole, at most `max_bytes`, by
    /// `deadline` (`timeout` makes the error when it passes): a model list and
    /// [`Client::server_json`] read their small answers this way.
    pub(super) async fn small_answer(
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
    pub(super) async fn status_error(
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
    pub(super) async fn source_for(
        &self,
        response: Response,
        deadline: Instant,
    ) -> Result<Source, LlmError> {
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

    /// The events of a whole JSON answer: its text, its tool calls, then the finished turn or
    /// the error.
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
