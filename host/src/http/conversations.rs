//! `GET /conversations/{id}`: a stored conversation's OpenAI-format messages (a JSON array),
//! for a caller allowed on its project. `GET /conversations?projectId=X&limit=N`: that
//! project's conversations, the most recently updated first (the chat panel's history).

use axum::{
    extract::{Path, Query, State},
    Json,
};
use rojos_conversations::{ConversationId, ConversationSummary};
use serde::Deserialize;
use serde_json::Value;

use super::{auth::Caller, chat::internal, error::ApiError};
use crate::{state::AppState, storage::ProjectId};

pub(super) async fn get(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let conversation = state
        .agent
        .store
        .get(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
    let project = ProjectId::parse(&conversation.project_id)
        .map_err(|e| ApiError::Internal(format!("stored project id: {e}")))?;
    caller.authorize(&project)?;
    Ok(Json(Value::Array(conversation.messages)))
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
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
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
