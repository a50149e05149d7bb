//! Rojos: a server that lets a chat model use tools on a user's project files.
//!
//! # Layout
//!
//! - [`cli`]: the `rojos` command line.
//! - [`config`]: `rojos.toml`, raw then validated.
//! - [`secret`]: API keys and tokens that never show in logs.
//! - [`storage`]: `<storage>/<projectId>/root/`, opened as capabilities; [`storage::ProjectId`].
//! - [`plugins`]: loading a tool plugin library, and running one call of it.
//! - [`registry`]: the loaded tools as an atomically swapped snapshot; OpenAI definitions.
//! - [`state`]: [`state::AppState`], built once at start.
//! - [`http`]: the routes, authentication and API errors.
//!
//! [`serve`] runs the server on a bound listener until `shutdown` completes; the binary and
//! the end-to-end tests both start it this way.

pub mod cli;
pub mod config;
pub mod http;
pub mod plugins;
pub mod registry;
pub mod secret;
pub mod state;
pub mod storage;

use std::future::Future;

use tokio::net::TcpListener;

use crate::state::AppState;

/// Serves the API on `listener` until `shutdown` completes.
///
/// # Errors
///
/// The listener fails.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, http::router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
