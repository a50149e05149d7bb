//! The HTTP API: every route on one screen. Handlers turn requests into calls on the state;
//! failures before a response starts become an [`error::ApiError`] (`{"error": "..."}`).
//! `server` is the accept loop that serves the router with the connection limits.

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
pub(crate) mod server;
mod tools;

use axum::{
    extract::DefaultBodyLimit,
    http::{header, HeaderValue},
    routing::{get, post},
    Router,
};
use tower_http::{set_header::SetResponseHeaderLayer, trace::TraceLayer};

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
        // No response may be sniffed into another type (an NDJSON line or a JSON error as HTML).
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}
