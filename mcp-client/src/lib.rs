//! Rojos as an MCP client (`docs/mcp.md`, "MCP servers as tool sources"): the servers of
//! `[mcp.servers.*]` (stdio or Streamable HTTP) are started or connected to with the host,
//! their tools enter the host's registry as `SERVER__TOOL` beside the plugins', and a chat's
//! call to one runs through the same dispatch as a plugin call. It stands on the plugin host
//! (a call's request, arguments and failures are a plugin call's) and never on the host,
//! which re-exports it as `rojos::mcp::client`.
//!
//! `config` is what a configured server is; `start` starts one server within its time-out: `process` runs a stdio one (child process,
//! stderr to the log, handshake) and `http` connects to one over Streamable HTTP, both giving
//! the same session, whose tool list `start` reads;
//! `lists` carries a server's later tool lists (`list_changed`, restarts, late starts);
//! `instance` keeps one session of a server and restarts it after a crash; `server` is a
//! configured server: its own instance, or one per project; `tools` is the naming
//! rule and one call; `projects` is a per-project server's instances (`{project_root}`);
//! `runtime` is the thread whose runtime owns the child processes, so
//! the servers live as long as the host whatever runtime (or none) started it.

pub mod config;
mod http;
mod instance;
mod lists;
mod process;
mod projects;
mod runtime;
mod server;
mod start;
mod tools;

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

pub use server::McpServer;
pub use tools::{qualified_name, McpTool, Unusable, MCP_TOOL_ERROR};

use crate::config::McpServerConfig;
use lists::{ListFeed, ListedTools};
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
    /// Each server's usable tools as listed at start, in configuration order.
    listed: Vec<(String, Vec<Arc<McpTool>>)>,
    /// One report per configured server, in name order.
    pub reports: Vec<ServerReport>,
    runtime: Option<ClientRuntime>,
    /// The servers' later lists, until [`McpClients::follow_tool_lists`] takes them.
    updates: Mutex<Option<mpsc::UnboundedReceiver<ListedTools>>>,
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
                listed: Vec::new(),
                reports: Vec::new(),
                runtime: None,
                updates: Mutex::new(None),
            });
        }
        let (sender, updates) = mpsc::unbounded_channel();
        let feeds: Vec<ListFeed> = configs
            .iter()
            .map(|c| ListFeed::new(&c.name, sender.clone()))
            .collect();
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
        let started = runtime.start_all(&listing, &feeds);
        let mut clients = McpClients {
            servers: Vec::new(),
            listed: Vec::new(),
            reports: Vec::new(),
            runtime: None,
            updates: Mutex::new(Some(updates)),
        };
        for ((config, outcome), feed) in configs.iter().zip(started).zip(feeds) {
            clients.add(config, outcome, &runtime, feed);
        }
        clients.runtime = Some(runtime);
        Ok(clients)
    }

    fn add(
        &mut self,
        config: &McpServerConfig,
        outcome: Result<(process::Session, Vec<rmcp::model::Tool>), process::StartFailure>,
        runtime: &ClientRuntime,
        feed: ListFeed,
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
                McpServer::per_project(config.clone(), limits, runtime.handle(), feed)
            }
            None => McpServer::new(config.clone(), runtime.handle(), session, feed),
        };
        let server = Arc::new(server);
        if report_error.is_some() && config.per_project.is_none() {
            McpServer::retry_in_background(&server);
        }
        let tools = usable_tools(&server, &listed);
        let count = tools.len();
        self.listed.push((config.name.clone(), tools));
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

    /// Each server's name and usable tools as listed at start, in configuration order (a
    /// server that did not start has none).
    pub fn listed_tools(&self) -> Vec<(String, Vec<Arc<McpTool>>)> {
        self.listed.clone()
    }

    /// Calls `apply` with a server's name and usable tools each time it lists them anew
    /// (`notifications/tools/list_changed`, a restart, a late start), on the client runtime,
    /// until the host stops. Only the first call has an effect.
    pub fn follow_tool_lists(&self, apply: impl Fn(&str, Vec<Arc<McpTool>>) + Send + 'static) {
        let updates = self
            .updates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (Some(mut updates), Some(runtime)) = (updates, &self.runtime) else {
            return;
        };
        let servers = self.servers.clone();
        runtime.handle().spawn(async move {
            while let Some(listed) = updates.recv().await {
                let Some(server) = servers.iter().find(|s| s.name() == listed.server) else {
                    continue;
                };
                apply(&listed.server, usable_tools(server, &listed.tools));
            }
        });
    }
}

/// The registry tools of `listed`, a list `server` gave; each unusable one is logged.
fn usable_tools(server: &Arc<McpServer>, listed: &[rmcp::model::Tool]) -> Vec<Arc<McpTool>> {
    listed
        .iter()
        .filter_map(|tool| match McpTool::new(server, tool) {
            Ok(tool) => Some(Arc::new(tool)),
            Err(unusable) => {
                tracing::warn!("{unusable}");
                None
            }
        })
        .collect()
}

impl Drop for McpClients {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shut_down(std::mem::take(&mut self.servers));
        }
    }
}
