//! `/mcp/{projectId}?rojo=NAME`: the MCP Streamable HTTP transport (`docs/mcp.md`). rmcp's
//! service speaks the protocol (sessions, SSE, version negotiation); in front of it,
//! [`admit`] checks what every other route checks: the bearer token (`401`), the project id
//! and the token's scope (`400`/`403`, as `POST /chat`), and the rojo (`400` when unknown,
//! as `GET /tools`). The checked project and rojo travel to the handler as an
//! [`McpTarget`] in the request's extensions, with the token's chat limits
//! ([`TokenLimits`]), which each `tools/call` passes as a chat does (`docs/mcp.md`, "Limits").

use std::sync::Arc;

use axum::{
    extract::{Path, Query, Request, State},
    middleware::{self, Next},
    response::Response,
    Router,
};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde::Deserialize;

use super::{auth::Caller, error::ApiError, limits::ChatLimits};
use crate::{
    mcp::{
        AdmittedCall, CallAdmission, CallRefused, McpAdmission, McpTarget, RojosMcpServer,
        TargetSource,
    },
    metrics::Metrics,
    state::AppState,
    storage::ProjectId,
};

/// The route, relative to the server's root.
const MCP_ROUTE: &str = "/mcp/{project}";

/// The rojo a URL names without `?rojo=`.
const DEFAULT_ROJO: &str = "default";

/// The query of an MCP URL.
#[derive(Debug, Deserialize)]
pub(super) struct McpQuery {
    rojo: Option<String>,
}

/// The MCP route: rmcp's Streamable HTTP service behind [`admit`].
pub(super) fn routes(state: &AppState) -> Router<AppState> {
    let agent = Arc::clone(&state.agent);
    let live = Arc::clone(&state.live);
    let factory = move || {
        Ok(RojosMcpServer::new(
            Arc::clone(&agent),
            Arc::clone(&live),
            TargetSource::PerHttpRequest,
        ))
    };
    let config = StreamableHttpServerConfig::default()
        // Open event streams end when the server shuts down.
        .with_cancellation_token(state.agent.shutdown.child_token())
        .with_max_request_body_bytes(state.config.max_body_bytes)
        // rmcp's default accepts only loopback `Host`s, against DNS rebinding of an
        // unauthenticated local server. Every request here needs a bearer token a rebound
        // page cannot present, and the server is meant to be reached by its public name
        // (behind a proxy, `docs/deploy.md`): any `Host` is accepted, as on every other route.
        .disable_allowed_hosts();
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    Router::new()
        .route_service(MCP_ROUTE, service)
        .route_layer(middleware::from_fn_with_state(state.clone(), admit))
}

/// Lets a request through to the MCP service once its token, project and rojo check out,
/// with its [`McpTarget`] attached.
async fn admit(
    caller: Caller,
    State(state): State<AppState>,
    Path(project): Path<String>,
    Query(query): Query<McpQuery>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let project = ProjectId::parse(&project).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    let rojo = query.rojo.unwrap_or_else(|| DEFAULT_ROJO.to_owned());
    state
        .live
        .settings()
        .rojo(&rojo)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    request.extensions_mut().insert(McpTarget { project, rojo });
    let limits = TokenLimits {
        limits: Arc::clone(&state.limits),
        metrics: Arc::clone(&state.metrics),
        token: caller.token(),
    };
    request
        .extensions_mut()
        .insert(McpAdmission(Arc::new(limits)));
    Ok(next.run(request).await)
}

/// The limits of `POST /chat` ([`ChatLimits`]) for one token's MCP tool calls: a call takes a
/// place among the server's open chats and the token's while it runs, and counts against the
/// token's rate; a refusal says which limit and when to try again.
#[derive(Debug)]
struct TokenLimits {
    limits: Arc<ChatLimits>,
    metrics: Arc<Metrics>,
    token: usize,
}

impl CallAdmission for TokenLimits {
    fn admit(&self) -> Result<AdmittedCall, CallRefused> {
        match self.limits.admit(self.token, &self.metrics) {
            Ok(permit) => Ok(AdmittedCall::holding(permit)),
            Err(ApiError::TooManyRequests { message, .. }) => Err(CallRefused(format!(
                "not run: {message} (an MCP tool call counts as a chat while it runs)"
            ))),
            Err(other) => Err(CallRefused(format!("not run: {other}"))),
        }
    }
}
