//! `GET /conversations/{id}?from=N`: a page of a stored conversation's OpenAI-format messages
//! (a JSON array of at most `[limits] max_conversation_page_bytes`, at least one message), for
//! a caller allowed on its project; `Link: <...?from=M>; rel="next"` and `Rojos-Next-From: M`
//! say where the next page starts. `GET /conversations?projectId=X&limit=N[&q=TEXT]`: that
//! project's conversations (those whose title or message text contains `TEXT`), the most
//! recently updated first (the chat panel's history); one search at a time per token (`429`),
//! stopped past `[store] search_timeout_secs` (`503`). `PATCH /conversations/{id}`
//! `{"title": …}` renames one, `DELETE /conversations/{id}` deletes one with its undo
//! checkpoints (`409` while a run writes in it). A search's hits carry a snippet of their
//! first matching message. `GET /conversations/{id}/compactions`: the summaries standing for
//! its older messages. See `docs/api.md`, "Managing conversations" and "Long conversations".

use axum::{
    extract::{
        rejection::{JsonRejection, QueryRejection},
        Path, Query, State,
    },
    http::{header, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use rojos_conversations::{Compaction, ConversationHead, ConversationId, StoreError};
use rojos_project_storage::ProjectId;
use serde::Deserialize;
use serde_json::Value;

use super::{
    auth::Caller,
    error::ApiError,
    stored::{internal, lease_for_run, not_found, owned_head},
};
use crate::state::AppState;

/// The header giving the index of the next page's first message (absent on the last page).
const NEXT_FROM: HeaderName = HeaderName::from_static("rojos-next-from");

/// The header naming the rojo the conversation runs under (`docs/api.md`, "A
/// conversation's rojo").
const ROJO: HeaderName = HeaderName::from_static("rojos-rojo");

/// The header giving the index of the first message from which every turn is known to have
/// run under that rojo, sent only when it is not 0 (`docs/api.md`, "A conversation's rojo").
const ROJO_KEPT_FROM: HeaderName = HeaderName::from_static("rojos-rojo-kept-from");

#[derive(Debug, Deserialize)]
pub(super) struct PageQuery {
    /// The index of the page's first message (0: the first message).
    from: Option<u64>,
}

pub(super) async fn get(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let from = query.from.unwrap_or(0);
    let page = state
        .agent
        .store
        .page(&id, from, state.config.max_conversation_page_bytes)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
    let project = ProjectId::parse(&page.head.project_id)
        .map_err(|e| ApiError::internal("the stored project id is invalid", e))?;
    caller.authorize(&project)?;
    let mut response = Json(Value::Array(page.messages)).into_response();
    // A rojo's name is a TOML key of `rojos.toml`; one that is no header text is left out.
    if let Ok(rojo) = HeaderValue::from_str(&page.head.rojo) {
        response.headers_mut().insert(ROJO, rojo);
    }
    if page.head.rojo_kept_from > 0 {
        let kept_from = HeaderValue::from(page.head.rojo_kept_from);
        response.headers_mut().insert(ROJO_KEPT_FROM, kept_from);
    }
    if let Some(next) = page.next {
        let headers = response.headers_mut();
        // An id is `[A-Za-z0-9_-]` only and `next` a number: both are valid header text.
        let link = format!("</conversations/{id}?from={next}>; rel=\"next\"");
        if let Ok(link) = HeaderValue::from_str(&link) {
            headers.insert(header::LINK, link);
        }
        headers.insert(NEXT_FROM, HeaderValue::from(next));
    }
    Ok(response)
}

/// Conversations listed when the query gives no `limit`, and the most it may ask for.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;

/// The longest search text, in characters (`docs/api.md`, "Managing conversations").
const MAX_QUERY_CHARS: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListQuery {
    project_id: Option<String>,
    limit: Option<usize>,
    /// Text to search for in titles and messages; blank lists them all.
    q: Option<String>,
}

pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let project = query
        .project_id
        .ok_or_else(|| ApiError::BadRequest("projectId is required".to_owned()))?;
    let project = ProjectId::parse(&project).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let store = &state.agent.store;
    let text = query.q.as_deref().map(str::trim).unwrap_or_default();
    let list = if text.is_empty() {
        store
            .list(project.as_str(), limit)
            .await
            .map(|list| Json(list).into_response())
    } else {
        let chars = text.chars().count();
        if chars > MAX_QUERY_CHARS {
            return Err(ApiError::BadRequest(format!(
                "q is {chars} characters long, over the limit of {MAX_QUERY_CHARS}; search for \
                 a shorter text"
            )));
        }
        // Held until the search ends, or until this handler is dropped (its client went
        // away), which also stops the search's query (the store's `search`).
        let _slot =
            state
                .searches
                .take(caller.token())
                .ok_or_else(|| ApiError::TooManyRequests {
                    message: SEARCH_BUSY.to_owned(),
                    retry_after: 1,
                })?;
        // Each hit with its snippet (`docs/api.md`, "Managing conversations").
        store
            .search(project.as_str(), text, limit)
            .await
            .map(|hits| Json(hits).into_response())
    };
    match list {
        Ok(list) => Ok(list),
        Err(e @ StoreError::SearchTimedOut { .. }) => Err(ApiError::Unavailable(e.to_string())),
        Err(e) => Err(internal(e)),
    }
}

/// `GET /conversations/{id}/compactions`: the summaries that stand for the conversation's
/// older messages in what its model is sent, the one covering the fewest first
/// (`docs/api.md`, "Long conversations").
pub(super) async fn compactions(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<Compaction>>, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    owned_head(&caller, &state, &id).await?;
    let compactions = state.agent.store.compactions(&id).await.map_err(internal)?;
    Ok(Json(compactions))
}

/// The `429` body's text while the token's previous search still runs.
const SEARCH_BUSY: &str = "a search of this token is still running: one search at a time per \
     token; wait for its answer (or cancel it) before searching again";

/// `PATCH /conversations/{id}` with `{"title": "…"}` (a title shown instead of the first
/// message's text) or `{"title": null}` (back to it): `204`.
pub(super) async fn rename(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let Json(body) = body.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let title = title_of_body(&body)?;
    owned_head(&caller, &state, &id).await?;
    match state.agent.store.rename(&id, title).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(e @ StoreError::InvalidTitle { .. }) => Err(ApiError::BadRequest(e.to_string())),
        Err(StoreError::NotFound { .. }) => Err(not_found(&id)),
        Err(e) => Err(internal(e)),
    }
}

/// The `title` of a rename body: a string, or `null`; no other key.
fn title_of_body(body: &Value) -> Result<Option<&str>, ApiError> {
    const SHAPE: &str = r#"the body must be {"title": "new title"}, or {"title": null} to go back to the first message's text"#;
    let bad = || ApiError::BadRequest(SHAPE.to_owned());
    let object = body.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
    match object.get("title").ok_or_else(bad)? {
        Value::String(title) => Ok(Some(title)),
        Value::Null => Ok(None),
        _ => Err(bad()),
    }
}

/// `DELETE /conversations/{id}`: `204` once it and its messages are deleted; `409` while a
/// run writes in it (its run lease is held while deleting, so none can start meanwhile).
pub(super) async fn delete(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let head = owned_head(&caller, &state, &id).await?;
    let lease = lease_for_run(&state, &id, Some("delete it")).await?;
    let deleted = state.agent.store.delete(&id).await;
    lease.release().await;
    match deleted.map_err(internal)? {
        true => {
            forget_checkpoints(&state, &head, &id).await;
            Ok(StatusCode::NO_CONTENT)
        }
        false => Err(not_found(&id)),
    }
}

/// Removes a deleted conversation's undo checkpoints (docs/api.md, "Undo of file changes");
/// a failure is logged: the conversation is gone either way, and the budget drops what is
/// left in time.
async fn forget_checkpoints(state: &AppState, head: &ConversationHead, id: &ConversationId) {
    let Ok(project) = ProjectId::parse(&head.project_id) else {
        return;
    };
    if let Err(e) = state.agent.checkpoints.forget(&project, id).await {
        tracing::warn!(error = %e, conversation_id = %id, "the deleted conversation's checkpoints were not removed");
    }
}
