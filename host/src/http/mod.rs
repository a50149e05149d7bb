//! The HTTP API: every route on one screen. Handlers turn requests into calls on the state;
//! failures before a response starts become an [`error::ApiError`] (`{"error": "..."}`).

pub mod auth;
mod chat;
mod conversations;
pub mod error;
pub mod limits;
mod metrics;
mod ndjson;
mod panel;
mod projects;
mod rojos;
mod tools;

use axum::{
    extract::DefaultBodyLimit,
    routing::{get, post},
    Router,
};
use tower_http::trace::TraceLayer;

use crate::state::AppState;

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/tools", get(tools::list))
        .route("/chat", post(chat::chat))
        .route("/metrics", get(metrics::get))
        .route("/conversations/{id}", get(conversations::get))
        .route("/conversations", get(conversations::list))
        .route("/rojos", get(rojos::list))
        .route("/projects", get(projects::list))
        .route("/", get(panel::index))
        .route("/assets/panel.js", get(panel::script))
        .route("/assets/panel.css", get(panel::style))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}
