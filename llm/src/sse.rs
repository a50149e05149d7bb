//! Response bytes → SSE events (the `eventsource-stream` spec parser: LF/CRLF/CR, split
//! reads, comments, `data:` with or without the space, multi-line data) → classified items:
//! a chunk, `[DONE]`, or an in-stream error. Timing is `stream.rs`'s, meaning `assemble.rs`'s.

use std::pin::Pin;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{stream, Stream, StreamExt};
use serde_json::Value;

use crate::error::BoxError;
use crate::wire::{describe_error, Chunk, ErrorInfo};

/// A response body larger than the configured limit.
#[derive(Debug, thiserror::Error)]
#[error("the response is larger than {0} bytes")]
pub(crate) struct TooLarge(pub(crate) usize);

/// Why the frame stream failed.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The connection broke.
    Transport(BoxError),
    /// The body is not UTF-8 SSE, or too large.
    Malformed(String),
}

/// SSE events of a body, in order.
pub(crate) type Frames = Pin<Box<dyn Stream<Item = Result<Event, FrameError>> + Send>>;

/// Parses a body into SSE events, failing once it passes `max_bytes`.
pub(crate) fn frames<S, B, E>(body: S, max_bytes: usize) -> Frames
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: Into<Bytes>,
    E: Into<BoxError>,
{
    let mut seen = 0usize;
    let capped = body.map(move |item| {
        let bytes: Bytes = item.map_err(Into::into)?.into();
        seen = seen.saturating_add(bytes.len());
        if seen > max_bytes {
            return Err(Box::new(TooLarge(max_bytes)) as BoxError);
        }
        Ok(bytes)
    });
    // The parser only ends a line at CR once it sees the next byte (it could be CRLF), so a
    // CR-terminated body would lose its last event: one LF after a clean end settles it.
    let tail = stream::once(async { Ok::<Bytes, BoxError>(Bytes::from_static(b"\n")) });
    Box::pin(capped.chain(tail).eventsource().map(|item| {
        item.map_err(|e| match e {
            EventStreamError::Transport(e) => match e.downcast::<TooLarge>() {
                Ok(too_large) => FrameError::Malformed(too_large.to_string()),
                Err(e) => FrameError::Transport(e),
            },
            EventStreamError::Utf8(e) => {
                FrameError::Malformed(format!("the body is not UTF-8: {e}"))
            }
            EventStreamError::Parser(e) => FrameError::Malformed(format!("bad SSE framing: {e:?}")),
        })
    }))
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

/// Classifies one event.
///
/// # Errors
/// A description when the data is not JSON.
pub(crate) fn classify(event: &Event) -> Result<SseItem, String> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return Ok(SseItem::Done);
    }
    let parsed = serde_json::from_str::<Value>(data);
    if event.event == "error" {
        let info = parsed.ok().as_ref().and_then(describe_error);
        return Ok(SseItem::Error(info.unwrap_or_else(|| ErrorInfo {
            message: truncate(data, 500),
            code: None,
            tags: Vec::new(),
        })));
    }
    match parsed {
        Ok(value @ Value::Object(_)) => match serde_json::from_value::<Chunk>(value) {
            Ok(chunk) => Ok(SseItem::Chunk(Box::new(chunk))),
            Err(e) => Err(format!("unreadable chunk: {e}")),
        },
        Ok(_) => Ok(SseItem::Skip),
        Err(e) => Err(format!("data is not JSON ({e}): {}", truncate(data, 200))),
    }
}

/// The first `max` bytes of `text` (at a char boundary), marked when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn events(parts: &[&'static str]) -> Vec<Result<(String, String), String>> {
        let items: Vec<_> = parts
            .iter()
            .map(|p| Ok::<_, std::io::Error>(p.as_bytes()))
            .collect();
        let body = stream::iter(items);
        frames(body, 1 << 20)
            .map(|r| match r {
                Ok(e) => Ok((e.event, e.data)),
                Err(FrameError::Malformed(m)) => Err(m),
                Err(FrameError::Transport(e)) => Err(e.to_string()),
            })
            .collect()
            .await
    }

    fn ok(event: &str, data: &str) -> Result<(String, String), String> {
        Ok((event.to_string(), data.to_string()))
    }

    #[tokio::test]
    async fn framing_follows_the_spec() {
        let got = events(&[
            ": keep-alive\n\ndata:a\r\n\r",
            "\ndata: b\rdata: c\r\r",
            "event: error\ndata: {}\n\n",
        ])
        .await;
        assert_eq!(
            got,
            vec![ok("message", "a"), ok("message", "b\nc"), ok("error", "{}")]
        );
    }

    #[tokio::test]
    async fn last_cr_terminated_event_is_not_lost() {
        let got = events(&["data: [DONE]\r\r"]).await;
        assert_eq!(got, vec![ok("message", "[DONE]")]);
    }

    #[tokio::test]
    async fn body_over_the_limit_is_malformed() {
        let body = stream::iter([Ok::<_, std::io::Error>(vec![b'x'; 64])]);
        let got: Vec<_> = frames(body, 10).collect().await;
        assert!(
            matches!(&got[..], [Err(FrameError::Malformed(m))] if m.contains("larger than 10 bytes"))
        );
    }

    #[test]
    fn classify_reads_done_errors_and_chunks() {
        let ev = |event: &str, data: &str| Event {
            event: event.into(),
            data: data.into(),
            ..Event::default()
        };
        assert!(matches!(
            classify(&ev("message", " [DONE] ")),
            Ok(SseItem::Done)
        ));
        assert!(matches!(
            classify(&ev("message", "{\"choices\":[]}")),
            Ok(SseItem::Chunk(_))
        ));
        assert!(matches!(classify(&ev("message", "1")), Ok(SseItem::Skip)));
        assert!(classify(&ev("message", "oops"))
            .unwrap_err()
            .contains("not JSON"));
        match classify(&ev(
            "error",
            "{\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}",
        )) {
            Ok(SseItem::Error(info)) => {
                assert_eq!(info.message, "Overloaded");
                assert_eq!(info.code.as_deref(), Some("overloaded_error"));
            }
            other => panic!("{other:?}"),
        }
        match classify(&ev("error", "upstream gone")) {
            Ok(SseItem::Error(info)) => assert_eq!(info.message, "upstream gone"),
            other => panic!("{other:?}"),
        }
    }
}
