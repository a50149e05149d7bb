//! `GET /conversations/{id}?from=N`: a page of a stored conversation's OpenAI-format messages
//! (a JSON array of at most `[limits] max_conversation_page_bytes`, at least one message), for
//! a caller allowed on its project; `Link: <...?from=M>; rel="next"` and `Rojos-Next-From: M`
//! say where the next page starts. `GET /conversations?projectId=X&limit=N`: that project's
//! conversations, the most recently updated first (the chat panel's history).

use axum::{
    extract::{rejection::QueryRejection, Path, Query, State},
    http::{header, HeaderName, HeaderValue},
    response::{IntoResponse, Response},
    Json,
};
use rojos_conversations::{ConversationId, ConversationSummary};
use serde::Deserialize;
use serde_json::Value;

use super::{auth::Caller, chat::internal, error::ApiError};
use crate::{state::AppState, storage::ProjectId};

/// The header giving the index of the next page's first message (absent on the last page).
const NEXT_FROM: HeaderName = HeaderName::from_static("rojos-next-from");

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

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListQuery {
    project_id: Option<String>,
    limit: Option<usize>,
}

pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Vec<ConversationSummary>>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let project = query
        .project_id
        .ok_or_else(|| ApiError::BadRequest("projectId is required".to_owned()))?;
    let project = ProjectId::parse(&project).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let list = state
        .agent
        .store
        .list(project.as_str(), limit)
        .await
        .map_err(internal)?;
    Ok(Json(list))
}
