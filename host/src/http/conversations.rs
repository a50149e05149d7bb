//! `GET /conversations/{id}`: a stored conversation's OpenAI-format messages (a JSON array),
//! for a caller allowed on its project.

use axum::{
    extract::{Path, State},
    Json,
};
use rojos_conversations::ConversationId;
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
