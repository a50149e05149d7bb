//! A conversation's run, followed and stopped apart from the request that started it:
//! `GET /conversations/{id}/events?after=N` streams the events of its current (or just
//! finished) run after event number `N`, as `POST /chat` does (`204` when this host has no
//! run of it to follow, or, without `after`, when its run has ended); `POST /conversations/{id}/stop` stops it (`409` when none is being
//! written). See `docs/api.md`, "Runs", and `agent::feed`.

use axum::{
    extract::{rejection::QueryRejection, Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use rojos_conversations::ConversationId;
use serde::Deserialize;
use serde_json::json;

use super::{auth::Caller, conversations::owned_head, error::ApiError, ndjson};
use crate::{agent::StopCause, state::AppState};

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
    owned_head(&caller, &state, &id).await?;
    let Some(feed) = state.agent.feeds.get(&id) else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    // Without `after`, only a run in progress is followed: a client opening the conversation
    // reads a finished run's messages in its history.
    if query.after.is_none() && feed.is_done() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let after = query.after.unwrap_or(0);
    let last = feed.last_seq();
    if after > last {
        return Err(ApiError::BadRequest(format!(
            "after={after} is past the run's last event ({last}); ask from an event number \
             the run gave (or 0 for all of it)"
        )));
    }
    Ok(ndjson::response(
        feed.follow(after),
        state.metrics.open_stream(),
    ))
}

pub(super) async fn stop(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    owned_head(&caller, &state, &id).await?;
    let stopped = state
        .agent
        .feeds
        .get(&id)
        .is_some_and(|feed| feed.stop(StopCause::Asked));
    if !stopped {
        return Err(ApiError::Conflict(format!(
            "no reply is being written in conversation {id} on this server: there is nothing \
             to stop"
        )));
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "stopping": true }))).into_response())
}
