//! The HTTP API: every route on one screen. Handlers turn requests into calls on the state;
//! failures before a response starts become an [`error::ApiError`] (`{"error": "..."}`).
//! `server` is the accept loop that serves the router with the connection limits (the crate
//! `rojos-http-server`).

mod always_allowed;
mod approvals;
pub mod auth;
mod body_deadline;
mod chat;
mod conversations;
pub mod error;
mod files;
pub mod limits;
mod mcp;
mod metrics;
mod ndjson;
mod opened;
mod panel;
mod projects;
mod replace;
mod rojos;
mod runs;
pub mod search_slots;
pub mod server;
mod stored;
mod tools;
pub mod transfers;
mod undo;
mod undo_record;

use axum::{
    extract::DefaultBodyLimit,
    http::{header, HeaderValue},
    middleware,
    response::{IntoResponse, Response},
    routing::{delete, get, post},
    Router,
};
use tower_http::{set_header::SetResponseHeaderLayer, trace::TraceLayer};

use crate::state::AppState;

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/tools", get(tools::list))
        .route("/chat", post(chat::chat))
        .route("/metrics", get(metrics::get))
        .route(
            "/conversations/{id}",
            get(conversations::get)
                .patch(conversations::rename)
                .delete(conversations::delete),
        )
        .route(
            "/conversations/{id}/approvals/{approval_id}",
            post(approvals::decide),
        )
        .route("/conversations/{id}/events", get(runs::events))
        .route(
            "/conversations/{id}/compactions",
            get(conversations::compactions),
        )
        .route("/conversations/{id}/stop", post(runs::stop))
        .route(
            "/conversations/{id}/always-allowed",
            get(always_allowed::list),
        )
        .route(
            "/conversations/{id}/always-allowed/{tool}",
            delete(always_allowed::revoke),
        )
        .route("/conversations", get(conversations::list))
        .route("/conversations/{id}/checkpoints", get(undo::list))
        .route("/conversations/{id}/undo", post(undo::undo))
        .route(
            "/conversations/{id}/checkpoints/{run}/before",
            get(undo::before),
        )
        .route("/rojos", get(rojos::list))
        .route("/projects", get(projects::list))
        .route("/projects/{id}/files", get(files::list))
        .route(
            "/projects/{id}/files/content",
            get(files::content).put(files::upload),
        )
        .route("/", get(panel::index))
        .route("/assets/{*name}", get(panel::named_asset))
        .merge(mcp::routes(&state))
        // Set after every route: it applies to the routes registered before it.
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body_deadline::read_within_limit,
        ))
        .layer(TraceLayer::new_for_http())
        // No response may be sniffed into another type (an NDJSON line or a JSON error as HTML).
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .with_state(state)
}

/// Any path no route has: `404` with the API's error body.
async fn not_found(method: axum::http::Method, uri: axum::http::Uri) -> error::ApiError {
    error::ApiError::NotFound(format!(
        "no route for {method} {}: docs/api.md lists the routes",
        uri.path()
    ))
}

/// A route's path with a method it does not have: `405` with the API's error body (axum
/// adds the `Allow` header listing the methods it has).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let message = format!("{method} is not allowed on {}", uri.path());
    let body = axum::Json(serde_json::json!({ "error": message }));
    (axum::http::StatusCode::METHOD_NOT_ALLOWED, body).into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// How long `/readyz` waits for the conversation store's answer.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /readyz`: `200 ready` when the conversation store answers a trivial query within
/// [`READY_WAIT`], `503` with the reason otherwise. Unauthenticated, like `/healthz` (which
/// stays a liveness probe: the process answers).
async fn readyz(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Result<&'static str, error::ApiError> {
    let unavailable = || error::ApiError::Unavailable(stored::STORE_UNAVAILABLE.to_owned());
    match tokio::time::timeout(READY_WAIT, state.agent.store.ping()).await {
        Ok(Ok(())) => Ok("ready\n"),
        Ok(Err(e)) => Err(stored::internal(e)),
        Err(_elapsed) => Err(unavailable()),
    }
}
