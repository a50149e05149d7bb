//! Starting one MCP server's session, whatever its transport, within the configured start
//! time-out: a stdio server's process (`super::process`) or a Streamable HTTP server's
//! connection (`super::http`), then the server's tool list.

use rmcp::model::Tool;

use super::{
    http,
    lists::ListFeed,
    process::{self, Session, StartFailure},
};
use crate::config::{McpServerConfig, McpTransport};

/// Starts the server of `config` and lists its tools; its later lists go to `feed`. Must
/// run on the MCP client runtime (`super::runtime`), which drives the child's pipes.
pub(super) async fn start(
    config: &McpServerConfig,
    feed: ListFeed,
) -> Result<(Session, Vec<Tool>), StartFailure> {
    let limit = config.start_timeout;
    tokio::time::timeout(limit, connect(config, feed))
        .await
        .unwrap_or(Err(StartFailure::Timeout(limit.as_secs_f64())))
}

async fn connect(
    config: &McpServerConfig,
    feed: ListFeed,
) -> Result<(Session, Vec<Tool>), StartFailure> {
    match &config.transport {
        McpTransport::Stdio(stdio) => {
            process::spawn(&config.name, stdio, feed)
                .await?
                .listed()
                .await
        }
        McpTransport::Http(http) => http::connect(http, feed).await?.listed().await,
    }
}
