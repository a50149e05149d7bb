//! One response body → `TurnEvent`s under the clock: the idle timeout (reset only by data
//! events), the turn deadline, `[DONE]`, and what end-of-stream means. Also `TurnStream`, the
//! stream type callers hold. Connecting and retrying are `client`'s job.
//!
//! The clock is one timer per body, not one per event: a data event only moves the idle
//! deadline (a number), and the timer, armed for the deadline as it stood, is moved to the
//! current one when it fires early. Arming a timer for each wait and dropping it when the
//! event came was a timer-wheel insert and removal per streamed chunk.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::{sleep_until, Instant, Sleep};

use crate::assemble::{Assembler, Ending, NoOutput, PushError};
use crate::error::{BoxError, LlmError, SizeLimit};
use crate::limits::Limits;
use crate::sse::{self, FrameError, Frames, SseEvent, SseItem};
use crate::turn::{Turn, TurnEvent};
use crate::wire::ErrorInfo;

/// The events of one model turn: `TextDelta`s as they arrive, then one `Finished`, or an
/// error (after which the stream ends).
///
/// Dropping it cancels the turn and drops the upstream connection.
pub struct TurnStream {
    inner: Pin<Box<dyn Stream<Item = Result<TurnEvent, LlmError>> + Send>>,
    provider: String,
}

impl TurnStream {
    pub(crate) fn new(
        provider: String,
        inner: impl Stream<Item = Result<TurnEvent, LlmError>> + Send + 'static,
    ) -> Self {
        TurnStream {
            inner: Box::pin(inner),
            provider,
        }
    }

    /// Drives the stream to its end, handing each text delta to `on_text`, and returns the
    /// finished turn.
    ///
    /// # Errors
    /// The turn's error; text already handed to `on_text` stays valid as partial output.
    pub async fn collect_turn(mut self, mut on_text: impl FnMut(&str)) -> Result<Turn, LlmError> {
        while let Some(event) = self.inner.next().await {
            match event? {
                TurnEvent::TextDelta(text) => on_text(&text),
                TurnEvent::ToolCallStarted { .. } | TurnEvent::ToolCallProgress { .. } => {}
                TurnEvent::Finished(turn) => return Ok(turn),
            }
        }
        Err(LlmError::StreamCut {
            provider: self.provider,
            source: None,
        })
    }
}

impl Stream for TurnStream {
    type Item = Result<TurnEvent, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnStream")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

/// How to decode a recorded or live SSE body with [`decode_stream`].
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Names the provider in error messages (a host, usually).
    pub provider: String,
    /// Longest wait for the next data event; `None` waits forever.
    pub idle_timeout: Option<Duration>,
    /// Longest time for the whole body; `None` waits forever.
    pub turn_timeout: Option<Duration>,
    /// Size limits (turn, argument, event and body sizes are used).
    pub limits: Limits,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            provider: "provider".into(),
            idle_timeout: None,
            turn_timeout: None,
            limits: Limits::default(),
        }
    }
}

/// Decodes a Chat Completions SSE body (any stream of byte chunks) into a [`TurnStream`],
/// with no HTTP and no retries: for recorded bodies, tests, or a caller's own transport.
pub fn decode_stream<S, B, E>(body: S, options: DecodeOptions) -> TurnStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes>,
    E: Into<BoxError>,
{
    let provider = options.provider.clone();
    let frames = sse::frames(body, &options.limits);
    let clock = options
        .turn_timeout
        .map(|limit| (Instant::now() + limit, limit));
    let decoder = Decoder::new(frames, &options, clock);
    TurnStream::new(provider, decoder.into_stream())
}

/// Decodes one body; yields nothing more after `Finished` or an error.
pub(crate) struct Decoder {
    frames: Frames,
    assembler: Option<Assembler>,
    provider: String,
    idle: Option<Duration>,
    idle_deadline: Option<Instant>,
    /// The turn deadline and the configured limit (for the message).
    turn: Option<(Instant, Duration)>,
    /// `Limits::max_turn_bytes`, for the message.
    max_turn_bytes: usize,
    /// Tool-call status events of the last chunk not yet handed out.
    pending: VecDeque<TurnEvent>,
    /// The clock's timer, made at the first wait; it may be set earlier than the deadline it
    /// stands for (see the module doc).
    timer: Option<Pin<Box<Sleep>>>,
}

impl Decoder {
    pub(crate) fn new(
        frames: Frames,
        options: &DecodeOptions,
        turn: Option<(Instant, Duration)>,
    ) -> Self {
        Decoder {
            frames,
            assembler: Some(Assembler::new(
                options.limits.max_argument_bytes,
                options.limits.max_turn_bytes,
            )),
            provider: options.provider.clone(),
            idle: options.idle_timeout,
            idle_deadline: options.idle_timeout.map(|d| Instant::now() + d),
            turn,
            max_turn_bytes: options.limits.max_turn_bytes,
            pending: VecDeque::new(),
            timer: None,
        }
    }

    pub(crate) fn into_stream(self) -> impl Stream<Item = Result<TurnEvent, LlmError>> + Send {
        futures_util::stream::unfold(self, |mut decoder| async move {
            let item = decoder.next().await?;
            Some((item, decoder))
        })
    }

    /// The next event, `None` once the turn finished or failed.
    pub(crate) async fn next(&mut self) -> Option<Result<TurnEvent, LlmError>> {
        loop {
            if let Some(status) = self.pending.pop_front() {
                return Some(Ok(status));
            }
            // No assembler: the turn finished or failed, nothing more comes.
            self.assembler.as_ref()?;
            // Comments never come out of `frames`, so keep-alives cannot push the deadline back.
            let Some(frame) = self.next_frame().await else {
                return Some(self.on_timeout());
            };
            let assembler = self.assembler.as_mut()?;
            let event = match frame {
                None => return Some(self.on_end()),
                Some(Err(FrameError::Transport(source))) => {
                    return Some(self.fail(LlmError::StreamCut {
                        provider: self.provider.clone(),
                        source: Some(source),
                    }))
                }
                Some(Err(FrameError::Malformed(detail))) => return Some(self.malformed(detail)),
                Some(Err(FrameError::TooLarge(limit))) => return Some(self.too_large(limit)),
                Some(Ok(event)) => event,
            };
            self.idle_deadline = self.idle.map(|d| Instant::now() + d);
            match sse::classify(&event) {
                Ok(SseItem::Done) => return Some(self.complete(Ending::Done)),
                Ok(SseItem::Skip) => {}
                Ok(SseItem::Error(info)) => return Some(self.provider_error(info)),
                Ok(SseItem::Chunk(chunk)) => match assembler.push(*chunk) {
                    Ok(text) => {
                        // The chunk's text first, then its tool-call status (from `pending`).
                        assembler.drain_tool_events(&mut self.pending);
                        if let Some(text) = text {
                            return Some(Ok(TurnEvent::TextDelta(text)));
                        }
                    }
                    Err(PushError::Provider(info)) => return Some(self.provider_error(info)),
                    Err(PushError::TurnTooLarge) => {
                        let max_bytes = self.max_turn_bytes;
                        return Some(self.too_large(SizeLimit::Turn { max_bytes }));
                    }
                },
                Err(detail) => return Some(self.malformed(detail)),
            }
        }
    }

    /// The earlier of the idle and turn deadlines; `None` waits forever.
    fn deadline(&self) -> Option<Instant> {
        match (self.idle_deadline, self.turn) {
            (Some(idle), Some((turn, _))) => Some(idle.min(turn)),
            (idle, turn) => idle.or(turn.map(|t| t.0)),
        }
    }

    /// The body's next frame (`Some(None)` at its end), or `None` once the deadline passed.
    /// The timer is polled only when no frame is ready, as `timeout_at` did.
    async fn next_frame(&mut self) -> Option<Option<Result<SseEvent, FrameError>>> {
        let Some(at) = self.deadline() else {
            return Some(self.frames.next().await);
        };
        let timer = self.timer.get_or_insert_with(|| Box::pin(sleep_until(at)));
        loop {
            tokio::select! {
                biased;
                frame = self.frames.next() => return Some(frame),
                () = timer.as_mut() => {
                    if Instant::now() >= at {
                        return None;
                    }
                    // Armed for an earlier deadline: data came since. Move it and wait on.
                    timer.as_mut().reset(at);
                }
            }
        }
    }

    /// EOF: complete only if the provider said the turn ended; without a finish reason it
    /// is a cut after some output, and an empty turn before any.
    fn on_end(&mut self) -> Result<TurnEvent, LlmError> {
        match &self.assembler {
            Some(a) if a.has_finish_reason() => self.complete(Ending::Eof),
            Some(a) if !a.has_output() => {
                let received = a.received(Ending::Eof);
                self.fail(LlmError::EmptyTurn {
                    provider: self.provider.clone(),
                    received,
                })
            }
            _ => self.fail(LlmError::StreamCut {
                provider: self.provider.clone(),
                source: None,
            }),
        }
    }

    fn on_timeout(&mut self) -> Result<TurnEvent, LlmError> {
        if let Some((deadline, limit)) = self.turn {
            if Instant::now() >= deadline {
                return self.fail(LlmError::TurnTimeout {
                    provider: self.provider.clone(),
                    after: limit,
                });
            }
        }
        // A server that sent its finish reason but never closes nor sends `[DONE]`.
        if self
            .assembler
            .as_ref()
            .is_some_and(Assembler::has_finish_reason)
        {
            return self.complete(Ending::Eof);
        }
        self.fail(LlmError::IdleTimeout {
            provider: self.provider.clone(),
            after: self.idle.unwrap_or_default(),
        })
    }

    fn complete(&mut self, ending: Ending) -> Result<TurnEvent, LlmError> {
        match self.assembler.take() {
            Some(assembler) => assembler
                .finish_checked(ending)
                .map(TurnEvent::Finished)
                .map_err(|nothing| no_output_error(&self.provider, nothing)),
            None => Err(LlmError::StreamCut {
                provider: self.provider.clone(),
                source: None,
            }),
        }
    }

    fn fail(&mut self, error: LlmError) -> Result<TurnEvent, LlmError> {
        if let Some(a) = self.assembler.take() {
            if a.has_text() {
                tracing::debug!(provider = %self.provider, "turn failed after partial text");
            }
        }
        Err(error)
    }

    fn provider_error(&mut self, info: ErrorInfo) -> Result<TurnEvent, LlmError> {
        self.fail(LlmError::Provider {
            provider: self.provider.clone(),
            message: info.message,
            code: info.code,
        })
    }

    fn too_large(&mut self, limit: SizeLimit) -> Result<TurnEvent, LlmError> {
        self.fail(LlmError::TooLarge {
            provider: self.provider.clone(),
            limit,
        })
    }

    fn malformed(&mut self, detail: String) -> Result<TurnEvent, LlmError> {
        self.fail(LlmError::Malformed {
            provider: self.provider.clone(),
            detail,
        })
    }
}

/// The error for a turn that ended with nothing.
pub(crate) fn no_output_error(provider: &str, nothing: NoOutput) -> LlmError {
    match nothing {
        NoOutput::Empty { received } => LlmError::EmptyTurn {
            provider: provider.to_owned(),
            received,
        },
        NoOutput::LengthOnly => LlmError::LengthBeforeOutput {
            provider: provider.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests;
