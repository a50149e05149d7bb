//! `GET /rojos`: the configured rojos with their model and the loaded tools each enables, for
//! the chat panel's picker. `[{"name":"default","model":"qwen2.5:7b","tools":["list_files"]}]`

use axum::{extract::State, Json};
use serde::Serialize;

use super::auth::Caller;
use crate::state::AppState;

/// One rojo as the panel shows it.
#[derive(Debug, Serialize)]
pub(super) struct RojoInfo {
    name: String,
    model: Option<String>,
    tools: Vec<String>,
}

pub(super) async fn list(_caller: Caller, State(state): State<AppState>) -> Json<Vec<RojoInfo>> {
    let registry = state.registry.snapshot();
    let settings = state.live.settings();
    let rojos = settings
        .rojos
        .iter()
        .map(|(name, rojo)| RojoInfo {
            name: name.clone(),
            model: settings
                .provider_for(rojo)
                .map(|(provider, _)| provider.model),
            tools: registry
                .tools()
                .map(|t| t.name().to_owned())
                .filter(|t| rojo.tools.allows(t))
                .collect(),
        })
        .collect();
    Json(rojos)
}
