//! `GET /rojos`: the configured rojos with the provider each uses now, its status (and the fix
//! when none of its providers is available), its model's context window and where that
//! figure came from, and the loaded tools each enables, for the chat panel's picker and
//! banner (docs/api.md).

use axum::{extract::State, Json};
use serde::Serialize;

use super::{auth::Caller, chat::window_of};
use crate::{
    providers::{choice, status::Status},
    state::AppState,
};

/// One rojo as the panel shows it.
#[derive(Debug, Serialize)]
pub(super) struct RojoInfo {
    name: String,
    /// The model of the provider in use, if any.
    model: Option<String>,
    tools: Vec<String>,
    /// The provider in use, if any.
    provider: Option<ProviderInfo>,
    /// `ready`, `checking` or `unavailable`.
    status: &'static str,
    /// When `unavailable`: what is wrong and how to fix it.
    fix: Option<String>,
    /// The context window planned for with the provider in use, if any.
    context: Option<ContextInfo>,
}

/// A rojo's context window.
#[derive(Debug, Serialize)]
struct ContextInfo {
    /// Its size in tokens.
    tokens: u64,
    /// Where that came from (`rojo`, `provider`, `loaded`, `listed`, `known_model`,
    /// `default`).
    source: &'static str,
}

/// The provider a rojo uses.
#[derive(Debug, Serialize)]
struct ProviderInfo {
    name: String,
    label: String,
    model: String,
}

pub(super) async fn list(_caller: Caller, State(state): State<AppState>) -> Json<Vec<RojoInfo>> {
    let registry = state.registry.snapshot();
    let settings = state.live.settings();
    let mut rojos = Vec::with_capacity(settings.rojos.len());
    for (name, rojo) in &settings.rojos {
        let selection = choice::select(&state.statuses, &settings, rojo);
        let status = match &selection.chosen {
            Some(chosen) if matches!(chosen.status, Status::Ready { .. }) => "ready",
            None if selection.settled => "unavailable",
            _ => "checking",
        };
        let fix = (status == "unavailable").then(|| selection.fix(name));
        let context = match &selection.chosen {
            Some(chosen) => {
                let window =
                    window_of(&state, &settings, rojo, &chosen.provider, &chosen.client).await;
                Some(ContextInfo {
                    tokens: window.tokens,
                    source: window.source.name(),
                })
            }
            None => None,
        };
        let provider = selection.chosen.map(|chosen| ProviderInfo {
            label: chosen.provider.label().to_owned(),
            name: chosen.provider.name,
            model: chosen.provider.model,
        });
        rojos.push(RojoInfo {
            name: name.clone(),
            model: provider.as_ref().map(|p| p.model.clone()),
            tools: registry
                .tools()
                .map(|t| t.name().to_owned())
                .filter(|t| rojo.tools.allows(t))
                .collect(),
            provider,
            status,
            fix,
            context,
        });
    }
    Json(rojos)
}
