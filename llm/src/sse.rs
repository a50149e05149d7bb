//! Response bytes → SSE events (`sse/framer.rs`, linear and capped) → classified items: a
//! chunk, `[DONE]`, or an in-stream error. Each event's data is parsed straight into the
//! typed `Chunk`. Timing is `stream.rs`'s, meaning `assemble.rs`'s.

mod framer;

use std::collections::VecDeque;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::error::{BoxError, SizeLimit};
use crate::limits::Limits;
use crate::text::truncate;
use crate::wire::{describe_error, Chunk, ErrorInfo};

pub(crate) use framer::SseEvent;
use framer::{Framer, FramingError};

/// Why the frame stream failed.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The connection broke.
    Transport(BoxError),
    /// The body is not UTF-8 SSE.
    Malformed(String),
    /// An event or the body passed its cap; nothing more was read.
    TooLarge(SizeLimit),
}

/// SSE events of a body, in order.
pub(crate) type Frames = Pin<Box<dyn Stream<Item = Result<SseEvent, FrameError>> + Send>>;

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>> + Send>>;

/// Parses a body into SSE events. Stops reading at the first error: an event over
/// [`Limits::max_event_bytes`] or a body over `max_response_bytes`.
pub(crate) fn frames<S, B, E>(body: S, limits: &Limits) -> Frames
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes>,
    E: Into<BoxError>,
{
    let reader = FrameReader {
        body: Box::pin(body.map(|item| item.map(Into::into).map_err(Into::into))),
        framer: Framer::new(limits.max_event_bytes()),
        ready: VecDeque::new(),
        failure: None,
        read: 0,
        limits: *limits,
        ended: false,
    };
    Box::pin(futures_util::stream::unfold(
        reader,
        |mut reader| async move {
            let item = reader.next().await?;
            Some((item, reader))
        },
    ))
}

/// Pulls reads from the body only while no framed event is waiting.
struct FrameReader {
    body: Body,
    framer: Framer,
    /// Events framed but not yet handed out.
    ready: VecDeque<SseEvent>,
    /// The error to hand out once the events framed before it are out.
    failure: Option<FrameError>,
    /// Bytes read so far.
    read: usize,
    limits: Limits,
    /// The body ended or failed: nothing more is read.
    ended: bool,
}

impl FrameReader {
    async fn next(&mut self) -> Option<Result<SseEvent, FrameError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            if let Some(failure) = self.failure.take() {
                return Some(Err(failure));
            }
            if self.ended {
                return None;
            }
            match self.body.next().await {
                None => {
                    self.ended = true;
                    self.framer.finish(&mut self.ready);
                }
                Some(Err(e)) => self.fail(FrameError::Transport(e)),
                Some(Ok(bytes)) => self.feed(&bytes),
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.read = self.read.saturating_add(bytes.len());
        if self.read > self.limits.max_response_bytes {
            return self.fail(FrameError::TooLarge(SizeLimit::Response {
                max_bytes: self.limits.max_response_bytes,
            }));
        }
        match self.framer.feed(bytes, &mut self.ready) {
            Ok(()) => {}
            Err(FramingError::EventTooLarge) => self.fail(FrameError::TooLarge(SizeLimit::Event {
                max_bytes: self.limits.max_event_bytes(),
                max_turn_bytes: self.limits.max_turn_bytes,
            })),
            Err(FramingError::NotUtf8(e)) => {
                self.fail(FrameError::Malformed(format!("the body is not UTF-8: {e}")));
            }
        }
    }

    fn fail(&mut self, failure: FrameError) {
        self.ended = true;
        self.failure = Some(failure);
    }
}

/// What one SSE event means.
#[derive(Debug)]
pub(crate) enum SseItem {
    /// A Chat Completions chunk.
    Chunk(Box<Chunk>),
    /// `data: [DONE]`: the stream is complete.
    Done,
    /// `event: error`, whatever its data.
    Error(ErrorInfo),
    /// A JSON value that is not an object (a bare ping): nothing to do.
    Skip,
}

/// Classifies one event. The data is parsed once, straight into the typed [`Chunk`];
/// only an `event: error`'s data is read as a generic JSON value.
///
/// # Errors
/// A description when the data is not JSON.
pub(crate) fn classify(event: &SseEvent) -> Result<SseItem, String> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return Ok(SseItem::Done);
    }
    if event.event == "error" {
        let info = serde_json::from_str::<Value>(data)
            .ok()
            .as_ref()
            .and_then(describe_error);
        return Ok(SseItem::Error(info.unwrap_or_else(|| ErrorInfo {
            message: truncate(data, 500),
            code: None,
            tags: Vec::new(),
        })));
    }
    if data.starts_with('{') {
        return match serde_json::from_str::<Chunk>(data) {
            Ok(chunk) => Ok(SseItem::Chunk(Box::new(chunk))),
            Err(e) if e.is_data() => Err(format!("unreadable chunk: {e}")),
            Err(e) => Err(not_json(&e, data)),
        };
    }
    // Not an object: valid JSON (a bare ping) is skipped without building it.
    match serde_json::from_str::<IgnoredAny>(data) {
        Ok(_) => Ok(SseItem::Skip),
        Err(e) => Err(not_json(&e, data)),
    }
}

fn not_json(error: &serde_json::Error, data: &str) -> String {
    format!("data is not JSON ({error}): {}", truncate(data, 200))
}

#[cfg(test)]
mod tests;
