//! A conversation's run, followed and stopped apart from the request that started it:
//! `GET /conversations/{id}/events?after=N` streams the events of its current (or just
//! finished) run after event number `N`, as `POST /chat` does (`204` when it has no run to
//! follow, or, without `after`, when its run has ended); `POST /conversations/{id}/stop`
//! stops it (`409` when none is being written). With a store several hosts share, a run of
//! another host is followed and stopped through the store (`agent::remote`, `agent::relay`).
//! See `docs/api.md`, "Runs", and `agent::feed`.

use std::sync::Arc;

use axum::{
    extract::{rejection::QueryRejection, Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use rojos_agent::{feed::Feed, RemoteFollower, StopCause};
use rojos_conversations::ConversationId;
use serde::Deserialize;
use serde_json::json;

use super::{auth::Caller, error::ApiError, ndjson, stored};
use crate::state::AppState;

/// The query of `GET /conversations/{id}/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsQuery {
    /// The number (`seq`) of the last event the client has; `0` or absent: from the start.
    after: Option<u64>,
}

pub(super) async fn events(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    stored::owned_head(&caller, &state, &id).await?;
    let local = state.agent.feeds.get(&id);
    if let Some(feed) = local.as_ref().filter(|feed| !feed.is_done()) {
        return follow_here(&state, feed, query.after);
    }
    // Not running here: another host sharing the store may be running a newer run.
    if let Some(shared) = &state.agent.shared_feeds {
        let read = shared
            .read(&id, query.after.unwrap_or(0), 0)
            .await
            .map_err(stored::internal)?;
        if let Some(read) = read.filter(|read| local.as_ref().is_none_or(|f| f.run() != read.run)) {
            if query.after.is_none() && read.done {
                return Ok(StatusCode::NO_CONTENT.into_response());
            }
            let after = query.after.unwrap_or(0);
            // The running host publishes a run's events a moment after its own clients read
            // them (`agent::relay`): a client that read event N there and comes here may be
            // ahead of the store while the run goes on. Its follower waits for the store to
            // catch up; only an ended run's last event is final.
            if read.done {
                check_after(after, read.last_seq)?;
            }
            let follower =
                RemoteFollower::new(Arc::clone(shared), id, &read, after, state.agent.run_lease);
            return Ok(ndjson::remote_response(
                follower,
                state.metrics.open_stream(),
            ));
        }
    }
    match local {
        Some(feed) => follow_here(&state, &feed, query.after),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Follows a run of this host from event `after`.
fn follow_here(
    state: &AppState,
    feed: &Arc<Feed>,
    after: Option<u64>,
) -> Result<Response, ApiError> {
    // Without `after`, only a run in progress is followed: a client opening the conversation
    // reads a finished run's messages in its history.
    if after.is_none() && feed.is_done() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let after = after.unwrap_or(0);
    check_after(after, feed.last_seq())?;
    Ok(ndjson::response(
        feed.follow(after),
        state.metrics.open_stream(),
    ))
}

/// Refuses an `after` past the run's last event.
fn check_after(after: u64, last: u64) -> Result<(), ApiError> {
    if after > last {
        return Err(ApiError::BadRequest(format!(
            "after={after} is past the run's last event ({last}); ask from an event number \
             the run gave (or 0 for all of it)"
        )));
    }
    Ok(())
}

pub(super) async fn stop(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    stored::owned_head(&caller, &state, &id).await?;
    let mut stopped = state
        .agent
        .feeds
        .get(&id)
        .is_some_and(|feed| feed.stop(StopCause::Asked));
    if !stopped {
        // Another host sharing the store may be running it: it reads the request within
        // a fraction of a second.
        if let Some(shared) = &state.agent.shared_feeds {
            stopped = shared.ask_stop(&id).await.map_err(stored::internal)?;
        }
    }
    if !stopped {
        return Err(ApiError::Conflict(format!(
            "no reply is being written in conversation {id}: there is nothing to stop"
        )));
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "stopping": true }))).into_response())
}
