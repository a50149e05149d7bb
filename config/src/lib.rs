//! `rojos.toml`, in two steps: `RawConfig` (`raw`) mirrors the file exactly (unknown keys
//! are errors that name the key), `Config` is the validated form with paths resolved against
//! the config's folder and secrets read from the environment. Tool names are checked against
//! the loaded plugins by [`LiveConfig::check_tools`], once the registry exists. A file is a
//! [`ConfigFile`]: the start-time [`Config`] and the [`LiveConfig`] re-read on every edit.
//!
//! # Layout
//!
//! This file puts a whole file's sections together; each section's keys are read and checked
//! in a module of their own, and none of them uses this file.
//!
//! - `raw`: the file as written; `parse_error`: a TOML error as the user reads it.
//! - `keys`: [`ConfigError`] and the checks every section shares.
//! - `auth`: `[auth]`; `plugins` and `workers`: `[plugins]`; `limits`: `[server]` and
//!   `[limits]`; `transfers`: the file transfer limits; `store`: `[store]`; `mcp`:
//!   `[mcp.servers.*]`.
//! - `provider`: `[providers.NAME]`; `rojo`: `[rojos.NAME]`, with `tools` (its enabled tools)
//!   and `approve` (which of them wait for approval).
//! - [`names`]: the list of valid names an "unknown name" message shows.
//!
//! The types a section is read into live with the code that runs with them (a rojo's and the
//! run's budgets in `rojos-agent`, `[server]`'s in `rojos-http-server`, the MCP sessions' in
//! `rojos-mcp-server`, an MCP server's in `rojos-mcp-client`), re-exported here.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    num::NonZeroUsize,
    path::{Path, PathBuf},
    time::Duration,
};

use rojos_plugin_api::Limits;

mod approve;
mod auth;
mod keys;
mod limits;
mod mcp;
pub mod names;
mod parse_error;
mod plugins;
mod provider;
mod raw;
mod rojo;
mod store;
mod transfers;
mod workers;

pub use approve::DEFAULT_APPROVAL_TIMEOUT;
pub use auth::{ProjectScope, TokenConfig};
pub use keys::{ConfigError, EnvLookup};
pub use limits::DEFAULT_UNATTENDED_RUN;
pub use plugins::PluginsConfig;
pub use provider::ProviderConfig;
pub use rojos_agent::{
    rojo::{ApprovalRule, RojoConfig, ToolSelection},
    RunBudgets,
};
pub use rojos_http_server::HttpLimits;
pub use rojos_mcp_client::config::{
    HttpServer, McpServerConfig, McpTransport, PerProject, StdioServer,
};
pub use rojos_mcp_server::McpSessionLimits;
pub use store::StoreConfig;
pub use transfers::{TransferLimits, TRANSFER_BUFFER_BYTES};

use keys::{at_least, invalid, seconds_key};
use raw::RawConfig;

/// The validated configuration. Immutable once loaded.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Folder holding `<projectId>/root/` for every project.
    pub storage: PathBuf,
    /// Where conversations are kept (`[store]`).
    pub store: StoreConfig,
    /// How long a run's lease on its conversation lasts unless renewed (`[store]
    /// run_lease_secs`): how long a conversation stays locked after its host died mid-run.
    pub run_lease: Duration,
    /// Whether a run's events are published to the shared store so another host follows or
    /// stops it (`[store] share_runs`, PostgreSQL only; true unless set false).
    pub share_runs: bool,
    /// Who may call the API, and on which projects. Empty: the server makes one token at start.
    pub tokens: Vec<TokenConfig>,
    /// Which plugins to load and how to run them.
    pub plugins: PluginsConfig,
    /// Limits handed to file tools.
    pub limits: Limits,
    /// Longest tool result given to the model; longer ones are cut with a marker.
    pub max_result_bytes: usize,
    /// Largest accepted request body (`413` beyond).
    pub max_body_bytes: usize,
    /// Chat streams open at once, all tokens together (`429` beyond).
    pub max_concurrent_chats: usize,
    /// Chat streams open at once per token (`429` beyond).
    pub max_chats_per_token: usize,
    /// Connection-level protections of the HTTP server.
    pub http: HttpLimits,
    /// What one run may cost: tool calls, result bytes, model output, stored size.
    pub budgets: RunBudgets,
    /// Most bytes of messages one `GET /conversations/{id}` page returns.
    pub max_conversation_page_bytes: usize,
    /// Largest file uploaded or downloaded through `/projects/{id}/files/content` (`413`
    /// beyond; docs/api.md "Project files").
    pub max_upload_bytes: usize,
    /// How long an upload's body may take, and how many transfers run at once
    /// (docs/configuration.md, "Transfers").
    pub transfers: TransferLimits,
    /// Most bytes one project's undo checkpoints keep; the oldest are dropped first
    /// (docs/configuration.md, docs/api.md "Undo of file changes").
    pub checkpoint_bytes: usize,
    /// Most bytes of names and entries one checkpoint record may hold (a change whose record
    /// would be larger is not run; docs/configuration.md).
    pub checkpoint_record_bytes: usize,
    /// Most bytes of earlier file content all checkpoint recordings and undos of this host
    /// hold in memory at once (docs/configuration.md).
    pub checkpoint_memory_bytes: usize,
    /// Chats each token may start per minute (`429` beyond); `None`: no rate limit.
    pub rate_limit_per_minute: Option<u32>,
    /// The MCP servers (stdio or Streamable HTTP) whose tools join the registry (`[mcp.servers.*]`), by name.
    pub mcp_servers: Vec<McpServerConfig>,
    /// How long a call waits for the user's approval before it is denied (`[limits]
    /// approval_timeout_secs`).
    pub approval_timeout: Duration,
    /// When a run nobody follows stops (`[limits] unattended_run_secs`; docs/api.md, "Runs").
    pub unattended_run: rojos_agent::Unattended,
    /// The runtime's worker threads (`[server] worker_threads`); `None`: one per core.
    pub worker_threads: Option<NonZeroUsize>,
    /// How many MCP sessions may be open, and for how long one lives unused (`[limits]
    /// max_mcp_sessions`, `max_mcp_sessions_per_token`, `mcp_session_idle_secs`).
    pub mcp_sessions: McpSessionLimits,
}

/// What applies live from `rojos.toml` (re-read on every edit): the rojos and their
/// providers. The server holds it only as `live::Settings`, so nothing reads a stale copy.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// OpenAI-compatible endpoints, by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Assistants, by name.
    pub rojos: BTreeMap<String, RojoConfig>,
}

/// A whole `rojos.toml`: what is fixed at start, and what applies live.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The keys read once, at start.
    pub config: Config,
    /// The rojos and providers.
    pub live: LiveConfig,
}

impl ConfigFile {
    /// Reads and validates the config at `path`, taking secrets from the process environment.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        ConfigFile::load_with_env(path, &|name| std::env::var(name).ok())
    }

    /// [`ConfigFile::load`] with another environment.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load_with_env(path: &Path, env: EnvLookup<'_>) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        // Absolute, so paths in the config mean the same thing whatever the working folder.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let base = path.parent().unwrap_or(Path::new("/"));
        ConfigFile::parse(&text, &path, base, env)
    }

    /// Validates config text; relative paths resolve against `base`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the key at fault.
    pub fn parse(
        text: &str,
        path: &Path,
        base: &Path,
        env: EnvLookup<'_>,
    ) -> Result<ConfigFile, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_error::describe(text, &e),
        })?;
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_owned()
            } else {
                base.join(p)
            }
        };
        let (server, limits_raw) = (&raw.server, &raw.limits);

        let bind = limits::parse_bind(server.bind.as_deref())?;
        let storage = resolve(server.storage.as_deref().unwrap_or(Path::new("storage")));
        let store = store::parse_store(&raw.store, &storage, env, &resolve)?;
        let run_lease = store::parse_run_lease(&raw.store)?;
        let share_runs = store::parse_share_runs(&raw.store);

        let tokens = auth::parse_tokens(&raw.auth.tokens, env)?;
        let plugins = plugins::parse_plugins(&raw.plugins, &resolve)?;
        let limits = limits::parse_limits(limits_raw)?;
        let max_result_bytes = at_least(
            "limits.max_result_bytes",
            limits_raw.max_result_bytes,
            128 * 1024,
            1024,
        )?;
        let max_body_bytes = at_least(
            "server.max_body_bytes",
            server.max_body_bytes,
            1 << 20,
            1024,
        )?;
        let max_concurrent_chats = at_least(
            "server.max_concurrent_chats",
            server.max_concurrent_chats,
            1024,
            1,
        )?;
        let max_chats_per_token = at_least(
            "server.max_chats_per_token",
            server.max_chats_per_token,
            32,
            1,
        )?;
        let http = limits::parse_http(server)?;
        let worker_threads = limits::parse_worker_threads(server.worker_threads)?;
        let budgets = limits::parse_budgets(limits_raw, max_result_bytes)?;
        let max_conversation_page_bytes = at_least(
            "limits.max_conversation_page_bytes",
            limits_raw.max_conversation_page_bytes,
            1 << 20,
            1024,
        )?;
        let max_upload_bytes = at_least(
            "limits.max_upload_bytes",
            limits_raw.max_upload_bytes,
            10 << 20,
            1,
        )?;
        let transfers = transfers::parse_transfers(limits_raw)?;
        // 0 turns undo off (no checkpoint is recorded).
        let checkpoint_bytes = at_least(
            "limits.checkpoint_bytes",
            limits_raw.checkpoint_bytes,
            256 << 20,
            0,
        )?;
        let checkpoint_record_bytes = at_least(
            "limits.checkpoint_record_bytes",
            limits_raw.checkpoint_record_bytes,
            64 << 20,
            4096,
        )?;
        let checkpoint_memory_bytes = at_least(
            "limits.checkpoint_memory_bytes",
            limits_raw.checkpoint_memory_bytes,
            512 << 20,
            4096,
        )?;
        let approval_timeout = seconds_key(
            "limits.approval_timeout_secs",
            limits_raw.approval_timeout_secs,
            DEFAULT_APPROVAL_TIMEOUT,
            approve::MAX_APPROVAL_TIMEOUT_SECS,
        )?;
        let unattended_run = limits::parse_unattended(limits_raw.unattended_run_secs)?;
        let rate_limit_per_minute = auth::parse_rate_limit(raw.auth.rate_limit_per_minute)?;
        let mcp_sessions = limits::parse_mcp_sessions(limits_raw, plugins.call_timeout)?;
        let providers = rojo::parse_providers(&raw.providers, env, budgets.max_model_turn_bytes)?;
        let rojos = rojo::parse_rojos(&raw.rojos, &providers)?;
        let mcp_servers = mcp::parse_servers(&raw.mcp.servers, env)?;

        let config = Config {
            path: path.to_owned(),
            bind,
            storage,
            store,
            run_lease,
            share_runs,
            tokens,
            plugins,
            limits,
            max_result_bytes,
            max_body_bytes,
            max_concurrent_chats,
            max_chats_per_token,
            http,
            budgets,
            max_conversation_page_bytes,
            max_upload_bytes,
            transfers,
            checkpoint_bytes,
            checkpoint_record_bytes,
            checkpoint_memory_bytes,
            rate_limit_per_minute,
            mcp_servers,
            approval_timeout,
            unattended_run,
            worker_threads,
            mcp_sessions,
        };
        Ok(ConfigFile {
            config,
            live: LiveConfig { providers, rojos },
        })
    }
}

impl LiveConfig {
    /// Checks that every tool a rojo names is one of the `loaded` tools.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the rojo's `tools` key and the unknown tool, and listing
    /// the loaded ones.
    /// A name `SERVER__…` of a configured MCP server (`mcp_servers`) is accepted unchecked:
    /// that server may be down now and list the tool later (`docs/mcp.md`).
    pub fn check_tools(&self, loaded: &[&str], mcp_servers: &[&str]) -> Result<(), ConfigError> {
        let known = |tool: &str| {
            loaded.contains(&tool)
                || tool
                    .split_once("__")
                    .is_some_and(|(server, _)| mcp_servers.contains(&server))
        };
        for (name, rojo) in &self.rojos {
            approve::check(name, &rojo.approve, &rojo.tools, &known)?;
            if let ToolSelection::Only(list) = &rojo.tools {
                if let Some(unknown) = list.iter().find(|t| !known(t)) {
                    return Err(invalid(
                        format!("rojos.{name}.tools"),
                        format!(
                            "no loaded plugin provides a tool named {unknown:?} (loaded: {})",
                            crate::names::listed(loaded)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
