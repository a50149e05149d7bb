//! A server's tool lists after the first (`docs/mcp.md`, "Live tool lists"): the client
//! handler of every session ([`ListFeed`]) answers `notifications/tools/list_changed` by
//! listing the tools again, and a restart or a late start hands in the list it read; each
//! list goes, under the configured server's name, to one channel that `McpClients` turns
//! into registry tools and publishes.

use rmcp::{model::Tool, service::NotificationContext, ClientHandler, RoleClient};
use tokio::sync::mpsc;

/// One list a server gave after the first.
#[derive(Debug)]
pub(super) struct ListedTools {
    /// The configured server's name (`[mcp.servers.NAME]`; a per-project instance's lists
    /// count as its server's).
    pub server: String,
    /// What it listed.
    pub tools: Vec<Tool>,
}

/// Where one server's sessions send their new tool lists; the client handler of each of
/// its sessions.
#[derive(Debug, Clone)]
pub(super) struct ListFeed {
    server: String,
    updates: mpsc::UnboundedSender<ListedTools>,
}

impl ListFeed {
    /// The feed of server `server` into `updates`.
    pub(super) fn new(server: &str, updates: mpsc::UnboundedSender<ListedTools>) -> ListFeed {
        ListFeed {
            server: server.to_owned(),
            updates,
        }
    }

    /// Hands in `tools`, the server's list now. Nothing happens once the host stops
    /// reading lists (it is stopping).
    pub(super) fn send(&self, tools: Vec<Tool>) {
        let listed = ListedTools {
            server: self.server.clone(),
            tools,
        };
        let _ = self.updates.send(listed);
    }
}

impl ClientHandler for ListFeed {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Listed on a task of its own: the session's loop, which runs this handler, must
        // keep going to deliver the answer.
        let feed = self.clone();
        tokio::spawn(async move {
            match context.peer.list_all_tools().await {
                Ok(tools) => feed.send(tools),
                Err(error) => tracing::warn!(
                    mcp_server = %feed.server,
                    "MCP server {}: tools/list after notifications/tools/list_changed failed: {error}; the previous list stays",
                    feed.server
                ),
            }
        });
    }
}
