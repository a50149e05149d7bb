//! The Rojos server as a library: [`state::AppState`], everything a request handler needs,
//! built once at start from the config; the HTTP API; and [`serve`], which runs it.
//!
//! # Layout
//!
//! - [`state`]: [`state::AppState`], built from the config: storage, the plugin loader, the
//!   MCP servers, the tool registry, the token table, the conversation store and the agent.
//! - [`store`]: opening (and migrating) the conversation store `[store]` chooses.
//! - [`live`]: rojos and providers, reloaded when `rojos.toml` is edited (on the folder
//!   watcher the drop-in folder also uses, the crate `rojos-watcher`); [`mcp`]: the MCP
//!   server's view of them.
//! - [`providers`]: the providers as the user knows them; their background checks, status
//!   and the choice of each rojo's provider (the advice for each failure and the context
//!   windows are the agent's, re-exported).
//! - [`http`]: the routes, authentication, API errors, the NDJSON body and the chat panel
//!   (`assets/`, embedded); `http::server`, the accept loop with its limits on slow and idle
//!   connections (the crate `rojos-http-server`, re-exported with the metrics it counts into).
//!
//! The crates below it do the work: `rojos-agent` runs chats, `rojos-config` reads
//! `rojos.toml`, `rojos-plugin-host` and `rojos-mcp-client` provide the tools,
//! `rojos-mcp-server` serves them over MCP, `rojos-metrics` counts. The `rojos` binary
//! (`rojos-host`) adds the command line, the log and the runtime.

#![forbid(unsafe_code)]

mod hex;
pub mod http;
pub mod live;
pub mod mcp;
pub mod providers;
pub mod state;
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
/// limits (`rojos_config::HttpLimits`), and checks the providers in the background meanwhile
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
