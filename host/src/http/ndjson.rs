//! A run's events as the response body: `application/x-ndjson`, one JSON object a line,
//! each line flushed as it happens. Dropping the body (the client went away) drops the
//! receiver, which cancels the run. The body holds the chat's admission permit and its place
//! in `rojos_streams_open` until it ends or is dropped.

use axum::{
    body::{Body, Bytes},
    http::header,
    response::{IntoResponse, Response},
};
use futures_util::stream;
use tokio::sync::mpsc;

use super::limits::ChatPermit;
use crate::{agent::Event, metrics::Open};

/// The streaming response for a run's events; `held` is released when the body ends.
pub(super) fn response(events: mpsc::Receiver<Event>, held: (ChatPermit, Open)) -> Response {
    // The state, `held` included, is dropped when `recv` yields `None` (the run sent `DONE`
    // and ended) or when the body is dropped, whichever comes first.
    let lines = stream::unfold((events, held), |(mut events, held)| async move {
        let event = events.recv().await?;
        Some((
            Ok::<_, std::convert::Infallible>(Bytes::from(event.to_line())),
            (events, held),
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
