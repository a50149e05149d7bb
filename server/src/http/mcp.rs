//! `/mcp/{projectId}?rojo=NAME`: the MCP Streamable HTTP transport (`docs/mcp.md`). rmcp's
//! service speaks the protocol (sessions, SSE, version negotiation); in front of it,
//! [`admit`] checks what every other route checks: the bearer token (`401`), the project id
//! and the token's scope (`400`/`403`, as `POST /chat`), and the rojo (`400` when unknown,
//! as `GET /tools`). The checked project and rojo travel to the handler as an
//! [`McpTarget`] in the request's extensions, with the token's chat limits
//! ([`TokenLimits`]), which each `tools/call` passes as a chat does (`docs/mcp.md`, "Limits").
//!
//! Sessions (`docs/mcp.md`, "Sessions"): an `initialize` takes a place of [`McpSessions`]
//! before rmcp sees it (`429`/`503` with a JSON-RPC error when there is none), and a request
//! naming a session (`Mcp-Session-Id`) goes through only with the token that opened it; any
//! other, like a session that has ended, is answered `404`.

use std::{borrow::Cow, sync::Arc};

use axum::{
    body::Body,
    extract::{Extension, Path, Query, Request, State},
    http::{header, HeaderValue, Method, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    Json, Router,
};
use rmcp::transport::streamable_http_server::{
    session::local::{LocalSessionManager, SessionConfig},
    StreamableHttpServerConfig, StreamableHttpService,
};
use rojos_mcp_server::{
    opening, AdmittedCall, BoundSessionManager, CallAdmission, CallRefused, McpAdmission,
    McpSessions, McpTarget, Rojos, RojosMcpServer, SessionRefused, TargetSource,
};
use rojos_metrics::Metrics;
use rojos_project_storage::ProjectId;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{auth::Caller, error::ApiError, limits::ChatLimits};
use crate::state::AppState;

/// The header naming a handshake session (the transport's `Mcp-Session-Id`).
const SESSION_HEADER: &str = "mcp-session-id";

/// The methods the transport answers (`405` for any other).
const ALLOWED_METHODS: &str = "GET, POST, DELETE";

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
    let rojos: Arc<dyn Rojos> = state.live.clone();
    let factory = move || {
        Ok(RojosMcpServer::new(
            Arc::clone(&agent),
            Arc::clone(&rojos),
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
    let limits = state.config.mcp_sessions;
    let sessions = McpSessions::new(limits, Arc::clone(&state.metrics));
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(limits.idle);
    let mut local = LocalSessionManager::default();
    local.session_config = session_config;
    let manager = BoundSessionManager::new(local, Arc::clone(&sessions));
    let service = StreamableHttpService::new(factory, Arc::new(manager), config);
    Router::new()
        .route_service(MCP_ROUTE, service)
        .route_layer(middleware::from_fn_with_state(state.clone(), admit))
        .route_layer(Extension(sessions))
}

/// Lets a request through to the MCP service once its token, project and rojo check out,
/// with its [`McpTarget`] attached; then a request naming a session only with the token that
/// opened it (`404` otherwise), and an `initialize` only with a place for its session, held
/// while rmcp creates it ([`opening`]; `429`/`503` when there is none).
async fn admit(
    caller: Caller,
    State(state): State<AppState>,
    Extension(sessions): Extension<Arc<McpSessions>>,
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
    let method = request.method().clone();
    if ![Method::GET, Method::POST, Method::DELETE].contains(&method) {
        return Err(ApiError::MethodNotAllowed {
            message: format!("{method} is not allowed on /mcp: use {ALLOWED_METHODS}"),
            allow: ALLOWED_METHODS,
        });
    }
    if let Some(id) = request.headers().get(SESSION_HEADER) {
        // Another token's session is answered as one that does not exist.
        let owner = id.to_str().ok().and_then(|id| sessions.owner(id));
        if owner != Some(caller.token()) {
            return Ok(session_not_found(&sessions));
        }
        return Ok(next.run(request).await);
    }
    if method != Method::POST {
        return Ok(next.run(request).await);
    }
    let (parts, body) = request.into_parts();
    let max = state.config.max_body_bytes;
    let body = axum::body::to_bytes(body, max)
        .await
        .map_err(|e| super::body_deadline::body_error(&e, max))?;
    let Some(id) = initialize_id(&body) else {
        return Ok(next.run(Request::from_parts(parts, Body::from(body))).await);
    };
    match sessions.reserve(caller.token()) {
        Ok(reservation) => {
            let request = Request::from_parts(parts, Body::from(body));
            Ok(opening(reservation, next.run(request)).await)
        }
        Err(refused) => {
            state.metrics.limited(refused.label());
            Ok(session_refused(refused, id, &sessions))
        }
    }
}

/// The part of a JSON-RPC message that says whether it opens a session.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    id: Option<Value>,
}

/// The id of the `initialize` request `body` is (which opens a session); `None` for any
/// other message, or one that does not parse (rmcp answers it).
fn initialize_id(body: &[u8]) -> Option<Value> {
    let peek: Peek<'_> = serde_json::from_slice(body).ok()?;
    (peek.method.as_deref() == Some("initialize")).then(|| peek.id.unwrap_or(Value::Null))
}

/// A JSON-RPC error answer (what MCP clients show their user) with `status`.
fn jsonrpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (status, Json(body)).into_response()
}

/// JSON-RPC's "server error" code, for a session that cannot be opened now.
const SESSION_LIMIT_CODE: i64 = -32000;

/// The code the official SDKs' servers give a session that does not exist.
const SESSION_NOT_FOUND_CODE: i64 = -32001;

/// `initialize` refused for want of a place: `429` (the token's limit) or `503` (the
/// server's), with `Retry-After` the idle time, after which an abandoned session has ended.
fn session_refused(refused: SessionRefused, id: Value, sessions: &McpSessions) -> Response {
    let status = match refused {
        SessionRefused::Token(..) => StatusCode::TOO_MANY_REQUESTS,
        SessionRefused::Server(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = jsonrpc_error(status, id, SESSION_LIMIT_CODE, refused.to_string());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(sessions.idle_secs()));
    response
}

/// `404` for a session that is not open, or not the caller's.
fn session_not_found(sessions: &McpSessions) -> Response {
    let idle = sessions.idle_secs();
    let message = format!(
        "no such MCP session: it has ended (DELETE, or {idle} s unused) or never existed; \
         send initialize without Mcp-Session-Id to open a new one"
    );
    jsonrpc_error(
        StatusCode::NOT_FOUND,
        Value::Null,
        SESSION_NOT_FOUND_CODE,
        message,
    )
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
