//! `GET /tools?rojo=NAME`: the OpenAI `tools` array that rojo offers its model, followed by
//! its quarantined tools, each marked with why (docs/api.md).

use axum::{
    extract::{Query, State},
    Json,
};
use serde::Deserialize;
use serde_json::Value;

use super::{auth::Caller, error::ApiError};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub(super) struct ToolsQuery {
    rojo: Option<String>,
}

pub(super) async fn list(
    _caller: Caller,
    State(state): State<AppState>,
    Query(query): Query<ToolsQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let name = query.rojo.as_deref().unwrap_or("default");
    let settings = state.live.settings();
    let rojo = settings
        .rojo(name)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let registry = state.registry.snapshot();
    let mut tools = registry.definitions(&rojo.tools);
    tools.extend(registry.quarantined(&rojo.tools));
    Ok(Json(tools))
}
