//! The HTTP API: every route on one screen. Handlers turn requests into calls on the state;
//! failures before a response starts become an [`error::ApiError`] (`{"error": "..."}`).

pub mod auth;
pub mod error;
mod tools;

use axum::{routing::get, Router};
use tower_http::trace::TraceLayer;

use crate::state::AppState;

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/tools", get(tools::list))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}
