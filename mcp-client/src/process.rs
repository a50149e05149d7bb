//! One MCP server's session, started (`super::start`) and ended. A stdio server
//! is a child process (the leader of a process group of its own, so ending it kills whatever
//! it started too; killed when dropped; with only a few inherited environment variables),
//! its stderr forwarded to the log under the server's name; a Streamable HTTP server is
//! connected to by `super::http`. Then rmcp's client handshake and the server's tool list,
//! all within the configured start time-out. Both give the same [`Session`], so restarts,
//! time-outs and calls (`super::server`) do not know the transport.

use std::{process::Stdio, time::Duration};

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::{
    model::Tool,
    service::{RunningService, ServiceExt},
    transport::TokioChildProcess,
    RoleClient,
};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::lists::ListFeed;
use crate::config::StdioServer;

/// A running server's client session, and its process group.
pub(super) struct Session {
    service: RunningService<RoleClient, ListFeed>,
    /// The process group a stdio server leads (its pid), killed as a whole when the session
    /// is stopped: the server may be gone already while what it started still runs. `None`
    /// for an HTTP server, which is not ours to kill.
    group: Option<u32>,
}

impl Session {
    /// The session of a server Rojos did not start (an HTTP one).
    pub(super) fn remote(service: RunningService<RoleClient, ListFeed>) -> Session {
        Session {
            service,
            group: None,
        }
    }

    /// This session's tools, once the handshake is done.
    pub(super) async fn listed(self) -> Result<(Session, Vec<Tool>), StartFailure> {
        let tools = self
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| StartFailure::Handshake(format!("tools/list: {e}")))?;
        Ok((self, tools))
    }
}

impl std::ops::Deref for Session {
    type Target = RunningService<RoleClient, ListFeed>;

    fn deref(&self) -> &Self::Target {
        &self.service
    }
}

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
    /// The process started (or the connection was made) but the MCP handshake or the tool
    /// list failed.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    /// An HTTP server refused the connection (nothing listens, or a proxy in the way).
    #[error("cannot connect to {url}: {reason}; check that the server runs and the url is right")]
    Unreachable {
        /// The configured url.
        url: String,
        /// What the connection reported.
        reason: String,
    },
    /// An HTTP server answered 401 Unauthorized or 403 Forbidden.
    #[error("{url} answered {status}: {reason}; check the server's headers and headers_from (e.g. that the variable behind Authorization holds a valid \"Bearer …\" token for that server)")]
    Unauthorized {
        /// The configured url.
        url: String,
        /// "401 Unauthorized" or "403 Forbidden".
        status: &'static str,
        /// What the transport reported.
        reason: String,
    },
    /// Starting took longer than `start_timeout_secs`.
    #[error("it did not answer within {0:.1} s")]
    Timeout(f64),
}

/// Starts a stdio server's process and does the handshake.
pub(super) async fn spawn(
    name: &str,
    config: &StdioServer,
    feed: ListFeed,
) -> Result<Session, StartFailure> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for name in INHERITED {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    for (name, value) in &config.env {
        command.env(name, value.expose());
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let (transport, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StartFailure::Spawn {
            command: config.command.clone(),
            reason: e.to_string(),
        })?;
    if let Some(stderr) = stderr {
        tokio::spawn(forward_stderr(name.to_owned(), stderr));
    }
    let group = transport.id();
    let service = feed
        .serve(transport)
        .await
        .map_err(|e| StartFailure::Handshake(e.to_string()))?;
    Ok(Session { service, group })
}

/// Logs each line the server writes on stderr, with its name, until the pipe closes.
async fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(mcp_server = %server, "stderr: {line}");
    }
}

/// Ends `session` politely (closing a stdio server's stdin; for an HTTP server, rmcp sends
/// the session's DELETE), within 3 s, then kills what is left of a stdio server's process
/// group.
pub(super) async fn stop(session: Session) {
    let Session { service, group } = session;
    if tokio::time::timeout(Duration::from_secs(3), service.cancel())
        .await
        .is_err()
    {
        tracing::warn!("an MCP server did not end its session within 3 s; it is left (a stdio server is killed)");
    }
    let leader = group
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(leader) = leader {
        // ESRCH (nothing left in the group) is the usual, quiet case.
        let _ = rustix::process::kill_process_group(leader, rustix::process::Signal::KILL);
    }
}
