//! `POST /chat`: admit the chat under the limits (`429` beyond), validate the body, authorise
//! the project, find or create the conversation, then start an agent run and stream its
//! events as NDJSON.

use axum::{
    extract::{rejection::JsonRejection, State},
    http::StatusCode,
    response::Response,
    Json,
};
use rojos_conversations::{ConversationId, StoreError};
use serde::Deserialize;
use serde_json::Value;

use super::{auth::Caller, error::ApiError, ndjson};
use crate::{agent::RunRequest, state::AppState, storage::ProjectId};

/// The request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ChatBody {
    project_id: String,
    rojo: Option<String>,
    conversation_id: Option<String>,
    message: String,
}

pub(super) async fn chat(
    caller: Caller,
    State(state): State<AppState>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let permit = state.limits.admit(caller.token(), &state.agent.metrics)?;
    let Json(body) =
        body.map_err(|rejection| json_error(rejection, state.config.max_body_bytes))?;
    // serde maps a JSON array onto a struct's fields by position: accept objects only.
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "invalid type: the body must be a JSON object".to_owned(),
        ));
    }
    let body: ChatBody = serde_json::from_value(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid body: {e}")))?;
    let project =
        ProjectId::parse(&body.project_id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    let rojo_name = body.rojo.unwrap_or_else(|| "default".to_owned());
    // One snapshot of the live settings for the whole message.
    let settings = state.live.settings();
    let rojo = settings
        .rojos
        .get(&rojo_name)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown rojo {rojo_name:?}")))?
        .clone();
    let client = settings
        .providers
        .get(&rojo.provider)
        .ok_or_else(|| ApiError::Internal(format!("rojo {rojo_name}: no client for its provider")))?
        .clone();
    if body.message.trim().is_empty() {
        return Err(ApiError::BadRequest("message must not be empty".to_owned()));
    }
    let store = &state.agent.store;
    let (conversation, history) = match body.conversation_id {
        None => (
            store
                .create(project.as_str(), &rojo_name)
                .await
                .map_err(internal)?,
            Vec::new(),
        ),
        Some(id) => {
            let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
            let conversation = store
                .get(&id)
                .await
                .map_err(internal)?
                .ok_or_else(|| ApiError::NotFound(format!("no conversation {id}")))?;
            if conversation.project_id != project.as_str() {
                return Err(ApiError::Forbidden(format!(
                    "conversation {id} belongs to another project"
                )));
            }
            (id, conversation.messages)
        }
    };
    let events = state.agent.start(RunRequest {
        project,
        rojo_name,
        rojo,
        client,
        conversation,
        history,
        message: body.message,
    });
    Ok(ndjson::response(
        events,
        (permit, state.agent.metrics.open_stream()),
    ))
}

fn json_error(rejection: JsonRejection, limit: usize) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(limit)
    } else {
        ApiError::BadRequest(rejection.body_text())
    }
}

pub(super) fn internal(e: StoreError) -> ApiError {
    ApiError::Internal(e.to_string())
}
