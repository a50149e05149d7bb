//! A run's events as the response body: `application/x-ndjson`, one JSON object a line,
//! each line flushed as it happens. Dropping the body (the client went away) drops the
//! receiver, which cancels the run.

use axum::{
    body::{Body, Bytes},
    http::header,
    response::{IntoResponse, Response},
};
use futures_util::stream;
use tokio::sync::mpsc;

use crate::agent::Event;

/// The streaming response for a run's events.
pub(super) fn response(events: mpsc::Receiver<Event>) -> Response {
    let lines = stream::unfold(events, |mut events| async move {
        let event = events.recv().await?;
        Some((
            Ok::<_, std::convert::Infallible>(Bytes::from(event.to_line())),
            events,
        ))
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
