//! `GET /conversations/{id}/checkpoints`: the conversation's runs that changed files, and
//! whether each can still be undone; `POST /conversations/{id}/undo` (body optional,
//! `{"force": true}`): puts back the files of its last run not yet undone, and records it in
//! the conversation for the model (`undo_record`). See docs/api.md,
//! "Undo of file changes", and `checkpoints`.

use axum::{
    body::Bytes,
    extract::{rejection::QueryRejection, Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use rojos_checkpoints::{Before, BeforeError, UndoError};
use rojos_conversations::ConversationId;
use rojos_project_storage::ProjectId;
use serde::Deserialize;
use serde_json::json;

use super::{
    auth::Caller,
    error::ApiError,
    stored::{lease_for_run, owned_head},
};
use crate::state::AppState;

/// The body of `POST /conversations/{id}/undo`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UndoBody {
    /// Undo even over changes made since the run.
    #[serde(default)]
    force: bool,
    /// The run to undo (its id from the listing): refused unless it is the last one not
    /// yet undone.
    #[serde(default)]
    run: Option<String>,
}

pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (id, project) = conversation(&caller, &state, &id).await?;
    let runs = state
        .agent
        .checkpoints
        .list(&project, &id)
        .await
        .map_err(|e| ApiError::internal("reading the checkpoints", e))?;
    Ok(Json(json!({ "checkpoints": runs })).into_response())
}

pub(super) async fn undo(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (id, project) = conversation(&caller, &state, &id).await?;
    let body: UndoBody = if body.iter().all(u8::is_ascii_whitespace) {
        UndoBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the body must be empty or {{\"run\": \"<run id>\", \"force\": true}} (both optional) ({e})"
            ))
        })?
    };
    let lease = lease_for_run(&state, &id, Some("undo")).await?;
    let undone = state
        .agent
        .checkpoints
        .undo(&project, &id, body.force, body.run)
        .await;
    // The history says so before the next run can start: the model reads it on its next turn.
    let recorded = match &undone {
        Ok(summary) => match super::undo_record::append(&state, &id, summary).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %rojos_agent::error_chain(&e), "the undo could not be recorded in the conversation");
                false
            }
        },
        Err(_) => false,
    };
    lease.release().await;
    match undone {
        Ok(summary) => Ok(Json(json!({ "undone": summary, "recorded": recorded })).into_response()),
        Err(UndoError::Changed(paths)) => {
            let message = UndoError::Changed(paths.clone()).to_string();
            Ok((
                StatusCode::CONFLICT,
                Json(json!({ "error": message, "changed": paths })),
            )
                .into_response())
        }
        Err(e @ UndoError::Nothing) => Err(ApiError::NotFound(e.to_string())),
        Err(e @ (UndoError::Evicted(_) | UndoError::Damaged(_) | UndoError::Unreadable(..))) => {
            Err(ApiError::Gone(e.to_string()))
        }
        Err(
            e @ (UndoError::Restore(_)
            | UndoError::NotLast { .. }
            | UndoError::Busy(_)
            | UndoError::Memory),
        ) => Err(ApiError::Conflict(e.to_string())),
        Err(UndoError::Io(e)) => Err(ApiError::internal("undoing file changes", e)),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct BeforeQuery {
    path: String,
}

/// `GET /conversations/{id}/checkpoints/{run}/before?path=P`: the text `P` held before the
/// run, `{"existed": true, "text": …}`, or `{"existed": false}` for a file the run created;
/// at most `[limits] max_read_bytes`.
pub(super) async fn before(
    caller: Caller,
    State(state): State<AppState>,
    Path((id, run)): Path<(String, String)>,
    query: Result<Query<BeforeQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (id, project) = conversation(&caller, &state, &id).await?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let limit = state.config.limits.max_read_bytes;
    let found = state
        .agent
        .checkpoints
        .before(&project, &id, &run, &query.path, limit)
        .await;
    match found {
        Ok(Before::Text(text)) => {
            Ok(Json(json!({ "existed": true, "text": text })).into_response())
        }
        Ok(Before::Absent) => Ok(Json(json!({ "existed": false })).into_response()),
        Err(e @ BeforeError::BadPath(_)) => Err(ApiError::BadRequest(e.to_string())),
        Err(e @ (BeforeError::NoRun(_) | BeforeError::NotRecorded(_))) => {
            Err(ApiError::NotFound(e.to_string()))
        }
        Err(e @ (BeforeError::Evicted(_) | BeforeError::Unreadable(..))) => {
            Err(ApiError::Gone(e.to_string()))
        }
        Err(e @ BeforeError::NotText(_)) => Err(ApiError::Unprocessable(e.to_string())),
        Err(e @ BeforeError::TooLarge { .. }) => Err(ApiError::TooLarge(e.to_string())),
        Err(BeforeError::Io(e)) => Err(ApiError::internal("reading a checkpoint", e)),
    }
}

/// The conversation `id` once the caller may see it (`400`/`404`/`403`), and its project.
async fn conversation(
    caller: &Caller,
    state: &AppState,
    id: &str,
) -> Result<(ConversationId, ProjectId), ApiError> {
    let id = ConversationId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let head = owned_head(caller, state, &id).await?;
    let project = ProjectId::parse(&head.project_id)
        .map_err(|e| ApiError::internal("the stored project id is invalid", e))?;
    Ok((id, project))
}
