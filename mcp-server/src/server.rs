//! The MCP protocol handler: `initialize` (with rmcp's version negotiation), `ping`,
//! `tools/list` and `tools/call` for one project and rojo, and
//! `notifications/tools/list_changed` when the rojo's offered tools change (to a handshake
//! session's peer, or on a `subscriptions/listen` stream of the `2026-07-28` revision).
//! Everything else (sessions, cancellation notifications, the transports' framing) is rmcp's.

use std::{
    future::Future,
    hash::{Hash, Hasher},
    sync::Arc,
    time::Duration,
};

use rmcp::{
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        SubscriptionFilter,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext},
    ErrorData, RoleServer, ServerHandler,
};

use rojos_agent::{
    rojo::{ApprovalRule, ToolSelection},
    Agent, SingleCallError,
};
use rojos_project_storage::ProjectId;

use crate::{admission::McpAdmission, rojos::Rojos, tools::mcp_tool};

/// The project and rojo an MCP request works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpTarget {
    /// The project the tools run in (already authorised for the caller).
    pub project: ProjectId,
    /// The rojo whose enabled tools are offered (checked to exist when the request came).
    pub rojo: String,
}

/// Where a request's [`McpTarget`] comes from.
#[derive(Debug, Clone)]
pub enum TargetSource {
    /// From each HTTP request: the HTTP layer checks the token and the URL's project and
    /// rojo, then puts the [`McpTarget`] in the request's extensions, which rmcp passes on.
    PerHttpRequest,
    /// One target for the whole connection (a transport with no URL, such as stdio).
    Fixed(McpTarget),
}

/// What the MCP client is told in `initialize`.
const INSTRUCTIONS: &str = "Tools on the files of one Rojos project, confined to its folder. \
     Paths are relative to the project root.";

/// The rojos MCP server: the tools of one rojo, run on one project.
#[derive(Debug, Clone)]
pub struct RojosMcpServer {
    agent: Arc<Agent>,
    rojos: Arc<dyn Rojos>,
    target: TargetSource,
}

impl RojosMcpServer {
    /// A server running calls through `agent`, reading `rojos` at each request (an edit of
    /// `rojos.toml` applies from the next request).
    pub fn new(agent: Arc<Agent>, rojos: Arc<dyn Rojos>, target: TargetSource) -> RojosMcpServer {
        RojosMcpServer {
            agent,
            rojos,
            target,
        }
    }

    /// The target of the request `context` carries.
    fn target(&self, context: &RequestContext<RoleServer>) -> Result<McpTarget, ErrorData> {
        self.target_in(&context.extensions)
    }

    /// The target of the message whose extensions are `extensions`.
    fn target_in(&self, extensions: &rmcp::model::Extensions) -> Result<McpTarget, ErrorData> {
        match &self.target {
            TargetSource::Fixed(target) => Ok(target.clone()),
            TargetSource::PerHttpRequest => extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<McpTarget>())
                .cloned()
                .ok_or_else(|| {
                    ErrorData::internal_error("the request carries no project and rojo", None)
                }),
        }
    }

    /// The tools `rojo` enables now; an error once the rojo is gone from `rojos.toml`.
    fn enabled_tools(&self, rojo: &str) -> Result<ToolSelection, ErrorData> {
        self.rojos
            .enabled_tools(rojo)
            .map_err(|unknown| ErrorData::invalid_request(unknown, None))
    }

    /// Which of `rojo`'s tools need the user's approval now (refused here: `docs/mcp.md`,
    /// "Approvals").
    fn approval_rule(&self, rojo: &str) -> ApprovalRule {
        self.rojos.approval_rule(rojo)
    }

    /// A digest of the tool definitions `rojo` offers now (none once the rojo is gone): what
    /// a session's watch keeps to tell a change, rather than a copy of every definition.
    fn offered(&self, rojo: &str) -> u64 {
        let definitions = match self.enabled_tools(rojo) {
            Ok(enabled) => self.agent.registry.snapshot().definitions(&enabled),
            Err(_) => Vec::new(),
        };
        let mut digest = std::hash::DefaultHasher::new();
        for definition in &definitions {
            definition.to_string().hash(&mut digest);
        }
        digest.finish()
    }

    /// Calls `notify` each time the tools `rojo` offers change (a registry replace: drop-ins,
    /// MCP sources; or a reload of `rojos.toml`), until `ended` completes or `notify` returns
    /// false (the client is gone). Changes that leave the offered list as it was send nothing.
    async fn follow_offered<F, Fut>(
        &self,
        rojo: &str,
        mut notify: F,
        ended: impl Future<Output = ()>,
    ) where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut registry = self.agent.registry.changes();
        let mut settings = self.rojos.changes();
        let mut last = self.offered(rojo);
        tokio::pin!(ended);
        loop {
            tokio::select! {
                () = &mut ended => return,
                changed = registry.changed() => if changed.is_err() { return },
                changed = settings.changed() => if changed.is_err() { return },
            }
            let now = self.offered(rojo);
            if now != last {
                last = now;
                if !notify().await {
                    return;
                }
            }
        }
    }
}

/// How often a handshake session's follower checks whether the session has ended (rmcp
/// gives no signal for it).
const SESSION_CHECK: Duration = Duration::from_secs(5);

/// Completes once `peer`'s session has ended.
async fn session_ended(peer: rmcp::Peer<RoleServer>) {
    while !peer.is_transport_closed() {
        tokio::time::sleep(SESSION_CHECK).await;
    }
}

/// The limits the request's transport puts each call under; none over stdio, where the
/// user who launched `rojos mcp` is the only caller.
fn admission(context: &RequestContext<RoleServer>) -> Option<McpAdmission> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<McpAdmission>())
        .cloned()
}

impl ServerHandler for RojosMcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("rojos", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    /// A handshake session is open: from now on it is told when its rojo's offered tools
    /// change (over HTTP, rmcp delivers the notification on the session's GET stream).
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Ok(target) = self.target_in(&context.extensions) else {
            return;
        };
        let server = self.clone();
        let peer = context.peer;
        tokio::spawn(async move {
            let notify = || {
                let peer = peer.clone();
                async move { peer.notify_tool_list_changed().await.is_ok() }
            };
            server
                .follow_offered(&target.rojo, notify, session_ended(peer.clone()))
                .await;
        });
    }

    /// `subscriptions/listen` (the `2026-07-28` revision, which has no session): the only
    /// notification offered is `notifications/tools/list_changed`.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// One `subscriptions/listen` stream: `notifications/tools/list_changed` on it while it
    /// is open, each time the rojo's offered tools change.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let target = self.target(context.request_context())?;
        let sink = context.sink().clone();
        let notify = || {
            let sink = sink.clone();
            async move { sink.notify_tool_list_changed().await.is_ok() }
        };
        self.follow_offered(&target.rojo, notify, context.cancelled())
            .await;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let target = self.target(&context)?;
        let enabled = self.enabled_tools(&target.rojo)?;
        let definitions = self.agent.registry.snapshot().definitions(&enabled);
        let tools = definitions.iter().filter_map(mcp_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let target = self.target(&context)?;
        let enabled = self.enabled_tools(&target.rojo)?;
        // Held until the call settles or is dropped (`docs/mcp.md`, "Limits").
        let _place = match admission(&context).map(|a| a.0.admit()).transpose() {
            Ok(place) => place,
            Err(refused) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(refused.0)]).into());
            }
        };
        let arguments = request.arguments.unwrap_or_default();
        let approve = self.approval_rule(&target.rojo);
        let call = self.agent.call_tool(
            &target.project,
            &enabled,
            &approve,
            &request.name,
            arguments,
        );
        // A client's `notifications/cancelled` cancels `context.ct`: the call is dropped as a
        // chat's is when its client goes away, and the error below goes to a client that has
        // stopped waiting for it.
        let settled = tokio::select! {
            settled = call => settled,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        let result = settled.map_err(|e| match e {
            SingleCallError::ProjectFolder(ref cause) => {
                tracing::error!(error = %cause, project_id = %target.project, "{e}");
                ErrorData::internal_error(e.to_string(), None)
            }
        })?;
        let content = vec![ContentBlock::text(result.text)];
        Ok(if result.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        }
        .into())
    }
}
