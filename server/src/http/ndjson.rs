//! A run's events as a response body: `application/x-ndjson`, one JSON object a line, each
//! line flushed as it happens. Events that are already waiting when the body is polled (a
//! slow reader, or several events made at once) go out together in one chunk, one write
//! instead of one each; nothing is ever held back to wait for more. The body follows the
//! run's feed (`agent::feed`): dropping it (the client went away) does not stop the run. The
//! body holds its place in `rojos_streams_open` until it ends or is dropped.

use axum::{
    body::Body,
    http::header,
    response::{IntoResponse, Response},
};
use futures_util::stream;

use rojos_agent::{Follower, RemoteFollower};
use rojos_metrics::Open;

/// The streaming response following a run's events; `held` is released when the body ends.
pub(super) fn response(events: Follower, held: Open) -> Response {
    // The state, `held` included, is dropped when the run's last event was given or when the
    // body is dropped, whichever comes first.
    let lines = stream::unfold((events, held), |(mut events, held)| async move {
        let chunk = events.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), (events, held)))
    });
    streaming(Body::from_stream(lines))
}

/// [`response`] following a run of another host, through the shared store.
pub(super) fn remote_response(events: RemoteFollower, held: Open) -> Response {
    let lines = stream::unfold((events, held), |(mut events, held)| async move {
        let chunk = events.next_chunk().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), (events, held)))
    });
    streaming(Body::from_stream(lines))
}

/// `body` with the headers of an event stream.
fn streaming(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response()
}
