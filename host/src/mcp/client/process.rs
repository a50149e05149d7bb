//! Starting one stdio MCP server: the child process (killed when dropped, with only a few
//! inherited environment variables), its stderr forwarded to the log under the server's
//! name, rmcp's client handshake and the server's tool list, all within the configured
//! start time-out.

use std::{process::Stdio, time::Duration};

use rmcp::{
    model::Tool,
    service::{RunningService, ServiceExt},
    transport::TokioChildProcess,
    RoleClient,
};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::McpServerConfig;

/// A running server's client session.
pub(super) type Session = RunningService<RoleClient, ()>;

/// The variables a server inherits from the host; everything else it gets only from its
/// `env` and `env_from` (`docs/mcp.md`), so the host's own secrets do not leak to it.
const INHERITED: [&str; 7] = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG"];

/// Why a server could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum StartFailure {
    /// The process could not be spawned (e.g. the command is not installed).
    #[error("cannot run {command:?}: {reason}")]
    Spawn {
        /// The configured command.
        command: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The process started but the MCP handshake or the tool list failed.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// Starting took longer than `start_timeout_secs`.
    #[error("it did not answer within {0:.1} s")]
    Timeout(f64),
}

/// Starts the server of `config` and lists its tools. Must run on the MCP client runtime
/// (`super::runtime`), which drives the child's pipes.
pub(super) async fn start(config: &McpServerConfig) -> Result<(Session, Vec<Tool>), StartFailure> {
    let limit = config.start_timeout;
    tokio::time::timeout(limit, connect(config))
        .await
        .unwrap_or(Err(StartFailure::Timeout(limit.as_secs_f64())))
}

async fn connect(config: &McpServerConfig) -> Result<(Session, Vec<Tool>), StartFailure> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear().kill_on_drop(true);
    for name in INHERITED {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (name, value) in &config.env {
        command.env(name, value.expose());
    }
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StartFailure::Spawn {
            command: config.command.clone(),
            reason: e.to_string(),
        })?;
    if let Some(stderr) = stderr {
        tokio::spawn(forward_stderr(config.name.clone(), stderr));
    }
    let session = ().serve(transport).await.map_err(|e| StartFailure::Handshake(e.to_string()))?;
    let tools = session
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| StartFailure::Handshake(format!("tools/list: {e}")))?;
    Ok((session, tools))
}

/// Logs each line the server writes on stderr, with its name, until the pipe closes.
async fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(mcp_server = %server, "stderr: {line}");
    }
}

/// Ends `session` politely (closing the server's stdin), then kills what is left.
pub(super) async fn stop(session: Session) {
    if tokio::time::timeout(Duration::from_secs(3), session.cancel())
        .await
        .is_err()
    {
        tracing::warn!("an MCP server did not stop within 3 s; it is killed");
    }
}
