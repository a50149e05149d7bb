//! `rojos mcp --project ID --rojo NAME`: the MCP server on stdin and stdout, for clients that
//! start a command (desktop assistants, editors). The same handler as `/mcp`, with the target
//! fixed by the command line; there is no token, since whoever starts the command can read
//! `rojos.toml` already. It ends when the client closes stdin.

use std::sync::Arc;

use rmcp::{service::ServerInitializeError, transport::stdio, ServiceExt};

use rojos_agent::Agent;

use crate::{rojos::Rojos, McpTarget, RojosMcpServer, TargetSource};

/// Why the stdio server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The client never completed the handshake (or closed stdin first).
    #[error("the MCP client did not start a session: {0}")]
    Handshake(Box<ServerInitializeError>),
    /// The task serving the session failed.
    #[error("the MCP session ended abnormally: {0}")]
    Session(#[from] tokio::task::JoinError),
}

/// Serves `target` on stdin and stdout until the client closes stdin.
///
/// # Errors
///
/// [`StdioError`] when the session could not start or ended abnormally.
pub async fn serve_stdio(
    agent: Arc<Agent>,
    rojos: Arc<dyn Rojos>,
    target: McpTarget,
) -> Result<(), StdioError> {
    let server = RojosMcpServer::new(agent, rojos, TargetSource::Fixed(target));
    let running = server
        .serve(stdio())
        .await
        .map_err(|e| StdioError::Handshake(Box::new(e)))?;
    let reason = running.waiting().await?;
    tracing::debug!(?reason, "MCP session over stdio ended");
    Ok(())
}
