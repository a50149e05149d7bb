//! One configured MCP server while the host runs: its own [`ServerInstance`] (session,
//! restarts, back-off: `instance`), or, for a per-project server, one instance per project
//! (`projects`), each call going to its project's.

use std::sync::Arc;

use tokio::runtime::Handle;

use super::{
    instance::ServerInstance,
    lists::ListFeed,
    process::{Session, StartFailure},
    projects::ProjectInstances,
};
use rojos_plugin_host::{CallRequest, ToolArgs, ToolFailure};

use crate::config::{McpServerConfig, PerProject};

/// One MCP server: its own instance, and a per-project server's instances.
#[derive(Debug)]
pub struct McpServer {
    /// The server's own session; a per-project server never starts it.
    own: Arc<ServerInstance>,
    /// A per-project server's instances; its calls go to them, never to `own`.
    projects: Option<Arc<ProjectInstances>>,
}

impl McpServer {
    /// A server of `config` whose processes run on `runtime`, with `session` when it started.
    pub(super) fn new(
        config: McpServerConfig,
        runtime: Handle,
        started: Result<Session, StartFailure>,
        feed: ListFeed,
    ) -> McpServer {
        McpServer {
            own: Arc::new(ServerInstance::new(config, runtime, started, feed)),
            projects: None,
        }
    }

    /// A per-project server of `config` (its tools listed already): one instance per
    /// project, started on the project's first call.
    pub(super) fn per_project(
        config: McpServerConfig,
        limits: PerProject,
        runtime: Handle,
        feed: ListFeed,
    ) -> McpServer {
        let projects = ProjectInstances::new(config.clone(), limits, runtime.clone(), feed.clone());
        McpServer {
            own: Arc::new(ServerInstance::not_started(config, runtime, feed)),
            projects: Some(projects),
        }
    }

    /// The name in `[mcp.servers.NAME]`.
    pub fn name(&self) -> &str {
        self.own.name()
    }

    /// Calls the server's tool `remote_name` with `args` for the project of `request`: on
    /// this server's own session, or, for a per-project server, on that project's instance.
    pub(super) async fn call(
        &self,
        remote_name: &str,
        args: &ToolArgs,
        request: &CallRequest,
    ) -> Result<rmcp::model::CallToolResult, ToolFailure> {
        let Some(projects) = &self.projects else {
            return self
                .own
                .call_session(remote_name, args, request.timeout)
                .await;
        };
        let instance = projects
            .get(&request.project_id, &request.root_path)
            .await?;
        let outcome = instance
            .call_session(remote_name, args, request.timeout)
            .await;
        drop(instance);
        projects.done(&request.project_id).await;
        outcome
    }

    /// Keeps trying to start a server that could not start, with the back-off, until it
    /// runs or the host stops ([`ServerInstance::retry_in_background`]).
    pub(super) fn retry_in_background(server: &Arc<McpServer>) {
        ServerInstance::retry_in_background(&server.own);
    }

    /// Ends the current sessions; the host is stopping.
    pub(super) async fn shut_down(&self) {
        if let Some(projects) = &self.projects {
            projects.shut_down().await;
        }
        self.own.stop_session().await;
    }
}
