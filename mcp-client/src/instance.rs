//! One process (or HTTP session) of a configured MCP server: its session, or why it is down,
//! restarted on the next call after a crash, with a back-off after each failed start (1 s,
//! 2 s, 4 s, … up to 60 s; `docs/mcp.md`). Starts and stops run on the MCP client runtime,
//! which owns the child processes; calls are made from any runtime through the session's peer.
//! A server has one instance, or one per project (`projects`).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::{model::CallToolRequestParams, service::ServiceError, Peer, RoleClient};
use tokio::{runtime::Handle, sync::Mutex};

use super::{
    lists::ListFeed,
    process::{self, Session, StartFailure},
    start,
};
use rojos_plugin_host::{FailureKind, ToolArgs, ToolFailure};

use crate::config::McpServerConfig;

/// The longest wait between two start attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One instance of an MCP server and its current session.
pub(super) struct ServerInstance {
    config: McpServerConfig,
    runtime: Handle,
    state: Mutex<ServerState>,
    /// Where the lists read at each (re)start and after `list_changed` go.
    feed: ListFeed,
}

impl std::fmt::Debug for ServerInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerInstance")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

/// The session, or why there is none and when the next start may be tried.
#[derive(Default)]
struct ServerState {
    session: Option<Session>,
    /// Counts sessions, so a failure seen on an old session does not end a new one.
    generation: u64,
    /// Failed starts in a row.
    failed_starts: u32,
    /// No start is tried before this.
    retry_at: Option<Instant>,
    /// Why the server is down, for the model and the log.
    down_because: Option<String>,
}

impl ServerInstance {
    /// An instance of `config` whose processes run on `runtime`, with `session` when it
    /// started.
    pub(super) fn new(
        config: McpServerConfig,
        runtime: Handle,
        started: Result<Session, StartFailure>,
        feed: ListFeed,
    ) -> ServerInstance {
        let mut state = ServerState::default();
        match started {
            Ok(session) => state.session = Some(session),
            Err(failure) => {
                state.record_failed_start(&failure);
            }
        }
        ServerInstance {
            config,
            runtime,
            state: Mutex::new(state),
            feed,
        }
    }

    /// An instance of `config` that starts on its first call.
    pub(super) fn not_started(
        config: McpServerConfig,
        runtime: Handle,
        feed: ListFeed,
    ) -> ServerInstance {
        ServerInstance {
            config,
            runtime,
            state: Mutex::new(ServerState::default()),
            feed,
        }
    }

    /// The name in `[mcp.servers.NAME]` (with its project for a per-project instance).
    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    /// Calls the tool on this server's session, starting the server first if it is down
    /// and its back-off has passed. A start is bounded by the server's `start_timeout_secs`
    /// and the call itself by `timeout`: a slow start (`npx` fetching a package, a Python
    /// server importing its SDK) does not eat the call's time, and a start that succeeds
    /// is kept even when the call then times out (`docs/mcp.md`, "Failures").
    pub(super) async fn call_session(
        &self,
        remote_name: &str,
        args: &ToolArgs,
        timeout: Duration,
    ) -> Result<rmcp::model::CallToolResult, ToolFailure> {
        let name = self.name();
        let (peer, generation) = self.peer().await?;
        let arguments = args.value().as_object().cloned().unwrap_or_default();
        let params = CallToolRequestParams::new(remote_name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(self.call_failed(generation, &error).await),
            Err(_) => {
                tracing::warn!(mcp_server = %name, tool = %remote_name, ?timeout, "MCP tool call timed out");
                Err(ToolFailure::new(
                    FailureKind::Timeout,
                    format!(
                        "MCP server {name} did not answer {remote_name} within {:.1} s",
                        timeout.as_secs_f64()
                    ),
                ))
            }
        }
    }

    /// The running session's peer and generation, starting the server if it is down.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), ToolFailure> {
        let mut state = self.state.lock().await;
        if let Some(session) = state.session.as_ref().filter(|s| !s.is_closed()) {
            return Ok((session.peer().clone(), state.generation));
        }
        if let Some(old) = state.session.take() {
            self.retire(old);
        }
        if let Some(retry_at) = state.retry_at.filter(|at| *at > Instant::now()) {
            return Err(self.down(&state, retry_at.saturating_duration_since(Instant::now())));
        }
        self.start_now(&mut state).await
    }

    /// Starts the server (its session is gone) and hands the list it reads to the feed, so
    /// a restarted server's tools are the ones it lists now.
    async fn start_now(
        &self,
        state: &mut ServerState,
    ) -> Result<(Peer<RoleClient>, u64), ToolFailure> {
        let config = self.config.clone();
        let feed = self.feed.clone();
        let started = self
            .runtime
            .spawn(async move { start::start(&config, feed).await })
            .await
            .unwrap_or_else(|join| Err(StartFailure::Handshake(join.to_string())));
        match started {
            Ok((session, tools)) => {
                tracing::info!(mcp_server = %self.name(), "MCP server started");
                let peer = session.peer().clone();
                state.session = Some(session);
                state.generation += 1;
                state.failed_starts = 0;
                state.retry_at = None;
                state.down_because = None;
                self.feed.send(tools);
                Ok((peer, state.generation))
            }
            Err(failure) => {
                tracing::warn!(mcp_server = %self.name(), "MCP server cannot start: {failure}");
                let wait = state.record_failed_start(&failure);
                Err(self.down(state, wait))
            }
        }
    }

    /// Keeps trying to start a server that could not start, with the back-off, until it
    /// runs (then its tools appear through the feed) or the host stops: it has no tools, so
    /// no call would start it (`docs/mcp.md`, "Live tool lists").
    pub(super) fn retry_in_background(server: &Arc<ServerInstance>) {
        let weak = Arc::downgrade(server);
        server.runtime.spawn(async move {
            loop {
                let wait = {
                    let Some(server) = weak.upgrade() else { return };
                    let mut state = server.state.lock().await;
                    if state.session.as_ref().is_some_and(|s| !s.is_closed()) {
                        return;
                    }
                    match state.retry_at.filter(|at| *at > Instant::now()) {
                        Some(at) => at.saturating_duration_since(Instant::now()),
                        None => {
                            if let Some(old) = state.session.take() {
                                server.retire(old);
                            }
                            if server.start_now(&mut state).await.is_ok() {
                                return;
                            }
                            continue;
                        }
                    }
                };
                tokio::time::sleep(wait).await;
            }
        });
    }

    /// The failure for a call that `error` ended; a closed transport means the server is
    /// gone: its session (if still `generation`) is dropped and the next call restarts it.
    async fn call_failed(&self, generation: u64, error: &ServiceError) -> ToolFailure {
        let name = self.name();
        match error {
            ServiceError::McpError(data) => ToolFailure::new(
                FailureKind::Host,
                format!("MCP server {name} refused the call: {}", data.message),
            ),
            _ => {
                let mut state = self.state.lock().await;
                if state.generation == generation {
                    if let Some(old) = state.session.take() {
                        self.retire(old);
                    }
                    state.down_because = Some(format!("it stopped during a call ({error})"));
                }
                tracing::warn!(mcp_server = %name, "MCP server stopped during a call: {error}");
                ToolFailure::new(
                    FailureKind::Host,
                    format!(
                        "MCP server {name} stopped during the call ({error}); it is restarted on the next call of one of its tools"
                    ),
                )
            }
        }
    }

    /// The failure for a call while the server is down for `wait` more.
    fn down(&self, state: &ServerState, wait: Duration) -> ToolFailure {
        let why = state.down_because.as_deref().unwrap_or("it is not running");
        ToolFailure::new(
            FailureKind::Host,
            format!(
                "MCP server {} is down: {why}; the next start is tried in {:.0} s; use other tools meanwhile, or ask the operator to check the server (see the host's log)",
                self.name(),
                wait.as_secs_f64().ceil()
            ),
        )
    }

    /// Ends an old session on the runtime that owns its process.
    fn retire(&self, session: Session) {
        self.runtime.spawn(process::stop(session));
    }

    /// Ends this server's own session, if it has one.
    pub(super) async fn stop_session(&self) {
        if let Some(session) = self.state.lock().await.session.take() {
            process::stop(session).await;
        }
    }
}

impl ServerState {
    /// Notes a failed start and returns how long until the next may be tried.
    fn record_failed_start(&mut self, failure: &StartFailure) -> Duration {
        self.failed_starts += 1;
        let wait = backoff(self.failed_starts);
        self.retry_at = Some(Instant::now() + wait);
        self.down_because = Some(format!("it could not start: {failure}"));
        wait
    }
}

/// The wait after `failed` starts in a row: 1 s, 2 s, 4 s, … up to [`MAX_BACKOFF`].
fn backoff(failed: u32) -> Duration {
    let seconds = 1u64 << failed.saturating_sub(1).min(6);
    Duration::from_secs(seconds).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_a_minute() {
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
