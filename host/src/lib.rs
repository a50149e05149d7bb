//! Rojos: a server that lets a chat model use tools on a user's project files.
//!
//! # Layout
//!
//! - [`cli`]: the `rojos` command line and its subcommands (`check`, `tools`, `probe`,
//!   `init`, `migrate`); [`logging`]: the log on stderr (text or JSON, colours only on a terminal).
//! - [`config`]: `rojos.toml`, raw then validated (the crate `rojos-config`, re-exported).
//! - [`secret`]: API keys and tokens that never show in logs.
//! - [`storage`]: `<storage>/<projectId>/root/`, opened as capabilities; [`storage::ProjectId`].
//! - [`checkpoints`]: undo of a run's file changes: the earlier state of the paths a
//!   changing tool names, recorded beside the project root, and put back on request.
//! - [`plugins`]: loading a tool plugin library, running one call of it (in the server or in
//!   a sandboxed worker), the drop-in folder: the crate `rojos-plugin-host`.
//! - [`names`]: the list of valid names an "unknown name" message shows.
//! - [`registry`]: the loaded tools as an atomically swapped snapshot; the OpenAI `tools`
//!   array (the agent's, the crate `rojos-agent`, re-exported).
//! - [`probe`]: `rojos probe`, a provider's streaming and tool-call check.
//! - [`live`]: rojos and providers, reloaded when `rojos.toml` is edited (on the folder
//!   watcher the drop-in folder also uses, the crate `rojos-watcher`).
//! - [`providers`]: the providers as the user knows them; their background checks, status
//!   and the choice of each rojo's provider (the advice for each failure and the context
//!   windows are the agent's, re-exported).
//! - [`state`]: [`state::AppState`], built once at start.
//! - [`store`]: opening (and migrating) the conversation store `[store]` chooses.
//! - [`agent`]: the agent loop: model turns, tool calls, events, stored history (the crate
//!   `rojos-agent`, re-exported; `config` reads a rojo and its budgets into its types).
//! - [`http`]: the routes, authentication, API errors and the NDJSON body; `http::server`,
//!   the accept loop with its limits on slow and idle connections (the crate
//!   `rojos-http-server`, re-exported with the metrics it counts into).
//! - [`mcp`]: Rojos as an MCP server: a rojo's tools listed and called on one project
//!   through the agent's confined call path (served over HTTP at `/mcp/{projectId}`; the
//!   crate `rojos-mcp-server`, re-exported, reading the live `rojos.toml` as its `Rojos`); and
//!   `mcp::client`, the MCP servers of `[mcp.servers.*]` (stdio or Streamable HTTP) as tool
//!   sources (the crate `rojos-mcp-client`, re-exported).
//! - [`metrics`]: the Prometheus counters and histograms `GET /metrics` renders (the crate
//!   `rojos-metrics`, re-exported).
//! - [`runtime`]: the tokio runtime the server runs on (tasks woken from other threads first).
//!
//! [`serve`] runs the server on a bound listener until `shutdown` completes; the binary and
//! the end-to-end tests both start it this way.

#![forbid(unsafe_code)]

pub mod agent;
pub mod checkpoints;
pub mod cli;
pub mod config;
mod hex;
pub mod http;
pub mod live;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod names;
pub mod plugins;
pub mod probe;
pub mod providers;
pub mod registry;
pub mod runtime;
pub mod secret;
pub mod state;
pub mod storage;
pub mod store;

use std::future::Future;

use tokio::net::{TcpListener, TcpSocket};

use crate::state::AppState;

/// Connections the kernel completes and holds for the server until it accepts them. Rust's
/// and tokio's `bind` ask for 128: a burst of new clients larger than that (`rojos-bench`
/// S3's 1,000 starting together) had its connection attempts dropped, each then waiting for
/// TCP's retries (1, 3, 7, 15 s) or failing. The kernel caps it at `net.core.somaxconn`
/// (4,096 by default since Linux 5.4; docs/deploy.md).
pub const LISTEN_BACKLOG: u32 = 4096;

/// How long shutdown waits for running chats to store their history.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves the API on `listener` until `shutdown` completes, with the `[server]` connection
/// limits ([`config::HttpLimits`]), and checks the providers in the background meanwhile
/// ([`providers::monitor`]). Then open chat streams end with `ERROR` + `DONE`, and running
/// chats get a moment to store their history.
///
/// # Errors
///
/// The listener fails.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let agent = std::sync::Arc::clone(&state.agent);
    let cancel = agent.shutdown.clone();
    let limits = state.config.http;
    let metrics = std::sync::Arc::new(http::server::ConnectionCounts(std::sync::Arc::clone(
        &state.metrics,
    )));
    agent.tasks.spawn(providers::monitor::run(
        std::sync::Arc::clone(&state.live),
        std::sync::Arc::clone(&state.statuses),
        cancel.clone(),
    ));
    http::server::run(listener, http::router(state), limits, metrics, async move {
        shutdown.await;
        cancel.cancel();
    })
    .await?;
    agent.tasks.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, agent.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("some chats were still running at shutdown");
    }
    Ok(())
}

/// A listening TCP socket on `address` that holds up to [`LISTEN_BACKLOG`] connections not
/// yet accepted; the address can be bound again at once after a restart (`SO_REUSEADDR`, as
/// `TcpListener::bind` sets it). Must be called within the tokio runtime.
///
/// # Errors
///
/// The socket cannot be made, bound or listened on.
pub fn listen(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Lifts the soft limit on open files to the hard one. Every open chat holds two sockets
/// (client and provider), and the often-default soft limit of 1024 would refuse clients from
/// about 500 concurrent chats on.
///
/// # Errors
///
/// The limit cannot be changed.
pub fn raise_open_files_limit() -> std::io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is unlimited; then aim for the kernel's usual `nr_open`.
    let target = limit.maximum.unwrap_or(1 << 20);
    if limit.current.is_some_and(|current| current < target) {
        let raised = Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised)?;
    }
    Ok(())
}
