//! The tools a conversation runs without asking ("Always allow" in an approval,
//! `docs/api.md`, "Approvals"): `GET /conversations/{id}/always-allowed` lists them and
//! `DELETE /conversations/{id}/always-allowed/{tool}` takes one back, so its next call is
//! asked about again. For a caller allowed on the conversation's project; through the
//! conversation store, so every host of a fleet sees the change at the next call.

use axum::{
    extract::{Path, State},
    Json,
};
use rojos_conversations::ConversationId;
use serde_json::{json, Value};

use super::{
    auth::Caller,
    error::ApiError,
    stored::{internal, owned_head},
};
use crate::state::AppState;

/// The conversation `id` names, once the caller may see its project.
async fn allowed_conversation(
    caller: &Caller,
    state: &AppState,
    id: &str,
) -> Result<ConversationId, ApiError> {
    let id = ConversationId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    owned_head(caller, state, &id).await?;
    Ok(id)
}

/// `GET /conversations/{id}/always-allowed`: `{"tools": ["delete_path", …]}`, by name.
pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = allowed_conversation(&caller, &state, &id).await?;
    let tools = state
        .agent
        .approvals
        .always_allowed_tools(&id)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "tools": tools })))
}

/// `DELETE /conversations/{id}/always-allowed/{tool}`: `{"tool": …, "revoked": true}`;
/// `404` when the tool is not always allowed in the conversation.
pub(super) async fn revoke(
    caller: Caller,
    State(state): State<AppState>,
    Path((id, tool)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let id = allowed_conversation(&caller, &state, &id).await?;
    let revoked = state
        .agent
        .approvals
        .revoke_always(&id, &tool)
        .await
        .map_err(internal)?;
    if !revoked {
        return Err(ApiError::NotFound(format!(
            "{tool:?} is not always allowed in conversation {id}; \
             GET /conversations/{id}/always-allowed lists the tools that are"
        )));
    }
    Ok(Json(json!({ "tool": tool, "revoked": true })))
}
