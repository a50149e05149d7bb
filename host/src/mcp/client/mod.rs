//! Rojos as an MCP client (`docs/mcp.md`, "MCP servers as tool sources"): the servers of
//! `[mcp.servers.*]` (stdio or Streamable HTTP) are started or connected to with the host, their tools enter the registry as
//! `SERVER__TOOL` beside the plugins', and a chat's call to one runs through the same
//! dispatch as a plugin call (`agent::dispatch`).
//!
//! `process` starts one server (child process, stderr to the log, handshake, tool list) and
//! `http` connects to one over Streamable HTTP, both giving the same session;
//! `server` keeps one server's session and restarts it after a crash; `tools` is the naming
//! rule and one call; `projects` is a per-project server's instances (`{project_root}`);
//! `runtime` is the thread whose runtime owns the child processes, so
//! the servers live as long as the host whatever runtime (or none) started it.

mod http;
mod process;
mod projects;
mod runtime;
mod server;
mod tools;

use std::sync::Arc;

pub use server::McpServer;
pub use tools::{qualified_name, McpTool, Unusable, MCP_TOOL_ERROR};

use crate::config::McpServerConfig;
use runtime::ClientRuntime;

/// What starting one server gave, for the log and `rojos check`.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// The server's name.
    pub name: String,
    /// How many of its tools are offered, or why it did not start.
    pub outcome: Result<usize, String>,
}

impl std::fmt::Display for ServerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.outcome {
            Ok(count) => write!(f, "MCP server {}: {count} tools", self.name),
            Err(why) => write!(f, "MCP server {}: not started: {why}", self.name),
        }
    }
}

/// The configured MCP servers, their tools and the runtime that owns their processes.
/// Dropping it stops every server.
#[derive(Debug)]
pub struct McpClients {
    servers: Vec<Arc<McpServer>>,
    /// Every usable tool of the servers that started.
    pub tools: Vec<Arc<McpTool>>,
    /// One report per configured server, in name order.
    pub reports: Vec<ServerReport>,
    runtime: Option<ClientRuntime>,
}

impl McpClients {
    /// Starts every server of `configs` at once and lists their tools; a server that cannot
    /// start is reported and offers no tools.
    ///
    /// # Errors
    ///
    /// The runtime thread could not be started.
    pub fn start(configs: &[McpServerConfig]) -> std::io::Result<McpClients> {
        if configs.is_empty() {
            return Ok(McpClients {
                servers: Vec::new(),
                tools: Vec::new(),
                reports: Vec::new(),
                runtime: None,
            });
        }
        let runtime = ClientRuntime::start()?;
        // A per-project server's tools are listed by an instance on an empty throwaway
        // folder, stopped once listed (`add`): the list is known before any project is.
        let listing_root = tempfile::tempdir()?;
        let listing: Vec<McpServerConfig> = configs
            .iter()
            .map(|c| match c.per_project {
                Some(_) => c.for_root(listing_root.path()),
                None => c.clone(),
            })
            .collect();
        let started = runtime.start_all(&listing);
        let mut clients = McpClients {
            servers: Vec::new(),
            tools: Vec::new(),
            reports: Vec::new(),
            runtime: None,
        };
        for (config, outcome) in configs.iter().zip(started) {
            clients.add(config, outcome, &runtime);
        }
        clients.runtime = Some(runtime);
        Ok(clients)
    }

    fn add(
        &mut self,
        config: &McpServerConfig,
        outcome: Result<(process::Session, Vec<rmcp::model::Tool>), process::StartFailure>,
        runtime: &ClientRuntime,
    ) {
        let (session, listed) = match outcome {
            Ok((session, listed)) => (Ok(session), listed),
            Err(failure) => (Err(failure), Vec::new()),
        };
        let report_error = session.as_ref().err().map(ToString::to_string);
        let server = match config.per_project {
            Some(limits) => {
                if let Ok(lister) = session {
                    runtime.handle().spawn(process::stop(lister));
                }
                McpServer::per_project(config.clone(), limits, runtime.handle())
            }
            None => McpServer::new(config.clone(), runtime.handle(), session),
        };
        let server = Arc::new(server);
        let mut count = 0;
        for tool in &listed {
            match McpTool::new(&server, tool) {
                Ok(tool) => {
                    self.tools.push(Arc::new(tool));
                    count += 1;
                }
                Err(unusable) => tracing::warn!("{unusable}"),
            }
        }
        let report = ServerReport {
            name: config.name.clone(),
            outcome: report_error.map_or(Ok(count), Err),
        };
        match &report.outcome {
            Ok(_) => tracing::info!("{report}"),
            Err(_) => tracing::warn!("{report}"),
        }
        self.reports.push(report);
        self.servers.push(server);
    }

    /// The configured servers' names.
    pub fn server_names(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.name()).collect()
    }
}

impl Drop for McpClients {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shut_down(std::mem::take(&mut self.servers));
        }
    }
}
