//! `GET /projects`: the ids of the projects that exist in storage (a folder
//! `<storage>/<projectId>/`) and that the caller's token may use, sorted, for the chat panel's
//! project picker. A project the token may use but that has no folder yet is not listed: the
//! first chat in it creates it.

use axum::{extract::State, Json};
use rojos_project_storage::ProjectId;

use super::{auth::Caller, error::ApiError};
use crate::state::AppState;

pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
) -> Result<Json<Vec<String>>, ApiError> {
    let storage = std::sync::Arc::clone(&state.storage);
    let folders = tokio::task::spawn_blocking(move || {
        let entries = storage.dir().entries()?;
        Ok::<_, std::io::Error>(
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect::<Vec<_>>(),
        )
    })
    .await
    .map_err(|e| ApiError::internal("listing storage", e))?
    .map_err(|e| ApiError::internal("listing storage", e))?;
    let mut projects: Vec<String> = folders
        .into_iter()
        .filter(|name| ProjectId::parse(name).is_ok_and(|id| caller.authorize(&id).is_ok()))
        .collect();
    projects.sort();
    Ok(Json(projects))
}
