//! A run's events as the response body: `application/x-ndjson`, one JSON object a line,
//! each line flushed as it happens. Events that are already waiting when the body is polled
//! (a slow reader, or several events made at once) go out together in one chunk, one write
//! instead of one each; nothing is ever held back to wait for more. Dropping the body (the
//! client went away) drops the receiver, which cancels the run. The body holds the chat's admission permit and its place
//! in `rojos_streams_open` until it ends or is dropped.

use axum::{
    body::{Body, Bytes},
    http::header,
    response::{IntoResponse, Response},
};
use futures_util::stream;
use tokio::sync::mpsc;

use super::limits::ChatPermit;
use crate::{agent::Line, metrics::Open};

/// The streaming response for a run's events; `held` is released when the body ends.
pub(super) fn response(events: mpsc::Receiver<Line>, held: (ChatPermit, Open)) -> Response {
    // The state, `held` included, is dropped when `recv` yields `None` (the run sent `DONE`
    // and ended) or when the body is dropped, whichever comes first.
    let lines = stream::unfold((events, held), |(mut events, held)| async move {
        let chunk = next_chunk(&mut events).await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), (events, held)))
    });
    (
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(lines),
    )
        .into_response()
}

/// Up to about this many bytes of waiting events go into one chunk.
const CHUNK_BYTES: usize = 32 * 1024;

/// The next event's line, followed by the lines of the events already waiting behind it (up
/// to [`CHUNK_BYTES`]); `None` once the run ended and every event was taken.
async fn next_chunk(events: &mut mpsc::Receiver<Line>) -> Option<Bytes> {
    let mut chunk = String::from(events.recv().await?);
    while chunk.len() < CHUNK_BYTES {
        match events.try_recv() {
            Ok(line) => chunk.push_str(line.as_str()),
            Err(_) => break,
        }
    }
    Some(Bytes::from(chunk))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::agent::Event;

    fn chat(text: &str) -> Line {
        Event::Chat { text: text.into() }.into()
    }

    #[tokio::test]
    async fn waiting_events_go_out_in_one_chunk_in_order() {
        let (tx, mut rx) = mpsc::channel(8);
        for text in ["a", "b", "c"] {
            tx.send(chat(text)).await.unwrap();
        }
        let chunk = next_chunk(&mut rx).await.unwrap();
        let expected = ["a", "b", "c"]
            .map(|t| chat(t).as_str().to_owned())
            .concat();
        assert_eq!(chunk, expected.as_bytes());
        // Nothing waits for more: the next event is its own chunk, and the end is the end.
        tx.send(chat("d")).await.unwrap();
        drop(tx);
        assert_eq!(
            next_chunk(&mut rx).await.unwrap(),
            chat("d").as_str().as_bytes()
        );
        assert_eq!(next_chunk(&mut rx).await, None);
    }

    #[tokio::test]
    async fn a_chunk_stops_growing_past_its_size() {
        let (tx, mut rx) = mpsc::channel(8);
        let big = "x".repeat(CHUNK_BYTES / 2);
        for _ in 0..4 {
            tx.send(chat(&big)).await.unwrap();
        }
        let first = next_chunk(&mut rx).await.unwrap();
        let line = chat(&big).as_str().len();
        assert_eq!(first.len(), 2 * line, "two half-chunk lines fill a chunk");
        assert_eq!(next_chunk(&mut rx).await.unwrap().len(), 2 * line);
    }
}
