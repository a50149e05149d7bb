//! Rojos: a server that lets a chat model use tools on a user's project files. This crate is
//! the `rojos` binary (`main.rs`) and its library: the command line, the log and the runtime,
//! over the crate `rojos-server`, which holds the server, and the crates below it.
//!
//! # Layout
//!
//! - [`cli`]: the `rojos` command line and its subcommands (`check`, `tools`, `probe`,
//!   `init`, `migrate`); [`logging`]: the log on stderr (text or JSON, colours only on a terminal).
//! - [`probe`]: `rojos probe`, a provider's streaming and tool-call check.
//! - [`runtime`]: the tokio runtime the server runs on (tasks woken from other threads first).
//!
//! Re-exported under the paths the binary, the tests and the bench name them by:
//!
//! - from `rojos-server`: [`state`] ([`state::AppState`], built once at start), [`store`],
//!   [`live`] (rojos and providers, reloaded when `rojos.toml` is edited), [`providers`]
//!   (their checks, status and the choice of each rojo's provider), [`http`] (the routes,
//!   authentication, API errors, the NDJSON body, the panel, and `http::server`, the accept
//!   loop), and [`serve`], [`listen`], [`raise_open_files_limit`];
//! - [`config`]: `rojos.toml`, raw then validated (the crate `rojos-config`), with [`names`];
//! - [`agent`]: the agent loop (the crate `rojos-agent`), with [`registry`], the loaded tools;
//! - [`mcp`]: Rojos as an MCP server (`rojos-mcp-server`) and `mcp::client`, MCP servers as
//!   tool sources (`rojos-mcp-client`);
//! - [`plugins`] (`rojos-plugin-host`), [`checkpoints`] (`rojos-checkpoints`), [`storage`]
//!   (`rojos-project-storage`), [`metrics`] (`rojos-metrics`), [`secret`] (`rojos_llm::Secret`).

#![forbid(unsafe_code)]

pub mod agent;
pub mod checkpoints;
pub mod cli;
pub mod config;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod names;
pub mod plugins;
pub mod probe;
pub mod registry;
pub mod runtime;
pub mod secret;
pub mod storage;

pub use rojos_server::{
    http, listen, live, providers, raise_open_files_limit, serve, state, store, LISTEN_BACKLOG,
};
