//! `rojos.toml`, in two steps: `RawConfig` (`raw`) mirrors the file exactly (unknown keys
//! are errors that name the key), `Config` is the validated form with paths resolved against
//! the config's folder and secrets read from the environment. Tool names are checked against
//! the loaded plugins by [`LiveConfig::check_tools`], once the registry exists. A file is a
//! [`ConfigFile`]: the start-time [`Config`] and the [`LiveConfig`] re-read on every edit.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    num::{NonZeroU32, NonZeroUsize},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use rojos_plugin_api::Limits;

use crate::{secret::Secret, storage::ProjectId};

mod approve;
mod mcp;
mod parse_error;
mod provider;
mod raw;
mod store;
mod transfers;
mod workers;

pub use approve::{ApprovalRule, DEFAULT_APPROVAL_TIMEOUT};
pub use mcp::{HttpServer, McpServerConfig, McpTransport, PerProject, StdioServer};
pub use provider::ProviderConfig;
pub use store::StoreConfig;
pub use transfers::{TransferLimits, TRANSFER_BUFFER_BYTES};

use raw::{RawConfig, RawLimits, RawNames, RawPlugins, RawProvider, RawRojo, RawServer, RawToken};

/// Why a configuration was refused. Messages name the key (`rojos.default.provider: ...`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config '{path}': {error}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// Why (in the message and not a `source`, so a printed cause chain says it once).
        error: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a value of the wrong type.
    #[error("config '{path}': {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The TOML parser's message, with line, column and the source line, secrets hidden
        /// (see docs/configuration.md, "Secrets in error messages").
        message: String,
    },
    /// A value is well-formed but wrong.
    #[error("{key}: {message}")]
    Invalid {
        /// The key, as a dotted path.
        key: String,
        /// What is wrong with its value.
        message: String,
    },
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

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
    pub unattended_run: crate::agent::Unattended,
    /// The runtime's worker threads (`[server] worker_threads`); `None`: one per core.
    pub worker_threads: Option<NonZeroUsize>,
    /// How many MCP sessions may be open, and for how long one lives unused (`[limits]
    /// max_mcp_sessions`, `max_mcp_sessions_per_token`, `mcp_session_idle_secs`).
    pub mcp_sessions: McpSessionLimits,
}

/// `[limits]` keys bounding the sessions of `/mcp` (`docs/mcp.md`, "Sessions").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSessionLimits {
    /// Sessions open at once, all tokens together (`503` beyond).
    pub max_sessions: usize,
    /// Sessions open at once per token (`429` beyond).
    pub max_sessions_per_token: usize,
    /// A session with no request for this long is ended.
    pub idle: Duration,
}

impl Default for McpSessionLimits {
    fn default() -> Self {
        McpSessionLimits {
            max_sessions: 512,
            max_sessions_per_token: 16,
            idle: Duration::from_secs(300),
        }
    }
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

/// `[server]` keys that protect the HTTP side from slow or idle clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A connection that has not sent a complete request head within this is closed.
    pub header_read_timeout: Duration,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; past it the oldest connection not in a request is closed.
    pub max_connections: usize,
    /// A client that reads none of its response for this long is disconnected (a chat's run
    /// is then cancelled as on a disconnect).
    pub stream_write_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 2048,
            stream_write_timeout: Duration::from_secs(30),
        }
    }
}

/// `[limits]` budgets of one run (one user message and everything it leads to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBudgets {
    /// Tool calls run per model turn; further calls get an error result naming the limit.
    pub max_tool_calls_per_turn: usize,
    /// Tool-result bytes given to the model per model turn.
    pub max_turn_result_bytes: usize,
    /// Tool-result bytes given to the model per run.
    pub max_run_result_bytes: usize,
    /// Bytes of one model turn from the provider (text plus tool-call arguments).
    pub max_model_turn_bytes: usize,
    /// Stored size of a conversation (its messages' JSON); past it a new message is refused.
    pub max_conversation_bytes: usize,
}

impl Default for RunBudgets {
    fn default() -> Self {
        RunBudgets {
            max_tool_calls_per_turn: 32,
            max_turn_result_bytes: 1 << 20,
            max_run_result_bytes: 2 << 20,
            max_model_turn_bytes: 2 << 20,
            max_conversation_bytes: 4 << 20,
        }
    }
}

/// One bearer token and the projects it may touch.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    /// The token value.
    pub token: Secret,
    /// The projects it is allowed on.
    pub projects: ProjectScope,
}

/// The projects a token is allowed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectScope {
    /// `["*"]`: every project.
    All,
    /// Only these project ids.
    Only(BTreeSet<String>),
}

impl ProjectScope {
    /// Whether `project` is in scope.
    pub fn allows(&self, project: &ProjectId) -> bool {
        match self {
            ProjectScope::All => true,
            ProjectScope::Only(set) => set.contains(project.as_str()),
        }
    }
}

/// `[plugins]`.
#[derive(Debug, Clone)]
pub struct PluginsConfig {
    /// Built-in plugin libraries, loaded at start, in this order (first wins a name clash).
    pub load: Vec<PathBuf>,
    /// The drop-in folder.
    pub dir: Option<PathBuf>,
    /// How long one tool call may run.
    pub call_timeout: Duration,
    /// How many calls of one plugin may run at once.
    pub max_concurrent_calls: usize,
    /// Where the `load` plugins run (drop-ins always run in workers).
    pub isolation: crate::plugins::Isolation,
    /// The workers' sandbox and limits.
    pub sandbox: rojos_plugin_worker::SandboxSettings,
    /// How long a worker with no calls stays.
    pub worker_idle: Duration,
    /// How a new worker is started (`worker_start`).
    pub worker_start: crate::plugins::WorkerStart,
    /// When a plugin whose workers keep dying is quarantined (`None`: never).
    pub quarantine: Option<rojos_plugin_worker::QuarantineRule>,
}

/// `[rojos.NAME]`.
#[derive(Debug, Clone)]
pub struct RojoConfig {
    /// The providers this rojo may talk to, in order of preference (at least one): the first
    /// available one is used.
    pub providers: Vec<String>,
    /// The system prompt, if any, shared by every model turn's request.
    pub system_prompt: Option<Arc<str>>,
    /// Which tools it may use.
    pub tools: ToolSelection,
    /// Model turns per user message: at least one, so every run makes a turn and ends with
    /// `DONE`.
    pub max_steps: NonZeroU32,
    /// Which tools wait for the user's approval (`approve`).
    pub approve: ApprovalRule,
    /// The model's context window in tokens (`context_tokens`), over its provider's.
    pub context_tokens: Option<u64>,
    /// How full the window may get, in percent, before older messages are shortened and
    /// summarised (`compact_at_percent`, default 80); 0 never does, and a conversation that
    /// outgrows the window then ends with the provider's error.
    pub compact_at_percent: u8,
}

/// A rojo's enabled tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSelection {
    /// `"*"`: every loaded tool.
    All,
    /// Only these names.
    Only(BTreeSet<String>),
}

impl ToolSelection {
    /// Whether the tool `name` is enabled.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ToolSelection::All => true,
            ToolSelection::Only(set) => {
                set.contains(name) || set.iter().any(|entry| server_wildcard(entry, name))
            }
        }
    }
}

/// Whether `entry` is `SERVER__*` (every tool of an MCP server, `docs/mcp.md`) and `name`
/// one of that server's tools.
fn server_wildcard(entry: &str, name: &str) -> bool {
    entry
        .strip_suffix('*')
        .is_some_and(|prefix| prefix.ends_with("__") && name.starts_with(prefix))
}

/// Where the server reads its environment variables from; tests pass their own.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

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

        let bind = parse_bind(server.bind.as_deref())?;
        let storage = resolve(server.storage.as_deref().unwrap_or(Path::new("storage")));
        let store = store::parse_store(&raw.store, &storage, env, &resolve)?;
        let run_lease = store::parse_run_lease(&raw.store)?;

        let tokens = parse_tokens(&raw.auth.tokens, env)?;
        let plugins = parse_plugins(&raw.plugins, &resolve)?;
        let limits = parse_limits(limits_raw)?;
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
        let http = parse_http(server)?;
        let worker_threads = parse_worker_threads(server.worker_threads)?;
        let budgets = parse_budgets(limits_raw, max_result_bytes)?;
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
        let unattended_run = parse_unattended(limits_raw.unattended_run_secs)?;
        let rate_limit_per_minute = parse_rate_limit(raw.auth.rate_limit_per_minute)?;
        let mcp_sessions = parse_mcp_sessions(limits_raw, plugins.call_timeout)?;
        let providers = parse_providers(&raw.providers, env, budgets.max_model_turn_bytes)?;
        let rojos = parse_rojos(&raw.rojos, &providers)?;
        let mcp_servers = mcp::parse_servers(&raw.mcp.servers, env)?;

        let config = Config {
            path: path.to_owned(),
            bind,
            storage,
            store,
            run_lease,
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

/// A number key: absent gives `default`; below `min` it is refused, naming the key.
fn at_least<T: PartialOrd + Copy + std::fmt::Display>(
    key: &str,
    value: Option<T>,
    default: T,
    min: T,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if value < min {
        return Err(invalid(key, format!("must be at least {min}")));
    }
    Ok(value)
}

/// The most worker threads `[server] worker_threads` may ask for: far more than any machine's
/// cores, so a typo (an extra digit or three) is refused, not a thousand idle threads started.
const MAX_WORKER_THREADS: usize = 1024;

fn parse_worker_threads(value: Option<usize>) -> Result<Option<NonZeroUsize>, ConfigError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match NonZeroUsize::new(value) {
        Some(n) if value <= MAX_WORKER_THREADS => Ok(Some(n)),
        _ => Err(invalid(
            "server.worker_threads",
            format!("must be between 1 and {MAX_WORKER_THREADS}"),
        )),
    }
}

fn parse_bind(text: Option<&str>) -> Result<SocketAddr, ConfigError> {
    let text = text.unwrap_or("127.0.0.1:8080");
    text.parse()
        .map_err(|_| invalid("server.bind", format!("not a socket address: {text:?}")))
}

fn parse_tokens(raw: &[RawToken], env: EnvLookup<'_>) -> Result<Vec<TokenConfig>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, t)| parse_token(i, t, env))
        .collect()
}

fn parse_rate_limit(per_minute: Option<u32>) -> Result<Option<u32>, ConfigError> {
    if per_minute == Some(0) {
        return Err(invalid(
            "auth.rate_limit_per_minute",
            "must be at least 1 (leave it out for no rate limit)",
        ));
    }
    Ok(per_minute)
}

fn parse_providers(
    raw: &BTreeMap<String, RawProvider>,
    env: EnvLookup<'_>,
    max_model_turn_bytes: usize,
) -> Result<BTreeMap<String, ProviderConfig>, ConfigError> {
    raw.iter()
        .map(|(name, p)| {
            Ok((
                name.clone(),
                provider::parse(name, p, env, max_model_turn_bytes)?,
            ))
        })
        .collect()
}

fn parse_rojos(
    raw: &BTreeMap<String, RawRojo>,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<BTreeMap<String, RojoConfig>, ConfigError> {
    raw.iter()
        .map(|(name, r)| Ok((name.clone(), parse_rojo(name, r, providers)?)))
        .collect()
}

fn parse_token(i: usize, raw: &RawToken, env: EnvLookup<'_>) -> Result<TokenConfig, ConfigError> {
    let key = format!("auth.tokens[{i}]");
    let token = match (&raw.token, &raw.token_env) {
        (Some(t), None) => t.clone(),
        (None, Some(var)) => env(var).ok_or_else(|| {
            invalid(
                format!("{key}.token_env"),
                format!("environment variable {var} is not set"),
            )
        })?,
        _ => return Err(invalid(&key, "give exactly one of `token` and `token_env`")),
    };
    if token.len() < 8 {
        return Err(invalid(&key, "a token must be at least 8 characters"));
    }
    let projects = if raw.projects.iter().any(|p| p == "*") {
        ProjectScope::All
    } else {
        for p in &raw.projects {
            ProjectId::parse(p).map_err(|e| invalid(format!("{key}.projects"), e.to_string()))?;
        }
        ProjectScope::Only(raw.projects.iter().cloned().collect())
    };
    Ok(TokenConfig {
        token: Secret::new(token),
        projects,
    })
}

fn parse_plugins(
    raw: &RawPlugins,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> Result<PluginsConfig, ConfigError> {
    let call_timeout = seconds_key(
        "plugins.call_timeout_secs",
        raw.call_timeout_secs,
        Duration::from_secs(10),
        3600.0,
    )?;
    let max_concurrent_calls = raw.max_concurrent_calls.unwrap_or(8);
    if max_concurrent_calls == 0 {
        return Err(invalid(
            "plugins.max_concurrent_calls",
            "must be at least 1",
        ));
    }
    let workers = workers::parse(raw)?;
    Ok(PluginsConfig {
        load: raw.load.iter().map(|p| resolve(p)).collect(),
        dir: raw.dir.as_deref().map(resolve),
        call_timeout,
        max_concurrent_calls,
        isolation: workers.isolation,
        sandbox: workers.sandbox,
        worker_idle: workers.idle,
        worker_start: workers.start,
        quarantine: workers.quarantine,
    })
}

fn parse_limits(raw: &RawLimits) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let positive = |key: &str, value: Option<u64>, default: u64| {
        at_least(&format!("limits.{key}"), value, default, 1)
    };
    Ok(Limits {
        max_read_bytes: positive(
            "max_read_bytes",
            raw.max_read_bytes,
            defaults.max_read_bytes,
        )?,
        max_write_bytes: positive(
            "max_write_bytes",
            raw.max_write_bytes,
            defaults.max_write_bytes,
        )?,
        max_list_entries: positive(
            "max_list_entries",
            raw.max_list_entries,
            defaults.max_list_entries,
        )?,
    })
}

/// A duration key in seconds: absent gives `default`; otherwise within `(0, max]`.
fn seconds_key(
    key: &str,
    value: Option<f64>,
    default: Duration,
    max: f64,
) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(s) if s > 0.0 && s <= max => Ok(Duration::from_secs_f64(s)),
        Some(_) => Err(invalid(key, format!("must be between 0 and {max} seconds"))),
    }
}

/// How long a run nobody follows goes on by default (`[limits] unattended_run_secs`).
pub const DEFAULT_UNATTENDED_RUN: Duration = Duration::from_secs(600);

/// The most seconds `unattended_run_secs` may say (a day).
const MAX_UNATTENDED_RUN_SECS: f64 = 86_400.0;

/// `[limits] unattended_run_secs`: how long a run goes on with nobody following it; `0`
/// stops it as soon as its last client leaves.
fn parse_unattended(value: Option<f64>) -> Result<crate::agent::Unattended, ConfigError> {
    use crate::agent::Unattended;
    match value {
        None => Ok(Unattended::After(DEFAULT_UNATTENDED_RUN)),
        Some(0.0) => Ok(Unattended::StopAtOnce),
        Some(s) if s > 0.0 && s <= MAX_UNATTENDED_RUN_SECS => {
            Ok(Unattended::After(Duration::from_secs_f64(s)))
        }
        Some(_) => Err(invalid(
            "limits.unattended_run_secs",
            format!(
                "must be between 0 (stop a run when its last client leaves) and \
                 {MAX_UNATTENDED_RUN_SECS} seconds"
            ),
        )),
    }
}

/// The most seconds `mcp_session_idle_secs` may say (a day).
const MAX_MCP_SESSION_IDLE_SECS: f64 = 86_400.0;

/// `[limits]`'s MCP session keys. A session must outlive a tool call (`call_timeout`): its
/// idle clock runs while a call of it is under way, so the default idle time is at least
/// twice the call time-out and a shorter one is refused.
fn parse_mcp_sessions(
    raw: &RawLimits,
    call_timeout: Duration,
) -> Result<McpSessionLimits, ConfigError> {
    let defaults = McpSessionLimits::default();
    let max_sessions = at_least(
        "limits.max_mcp_sessions",
        raw.max_mcp_sessions,
        defaults.max_sessions,
        1,
    )?;
    let max_sessions_per_token = at_least(
        "limits.max_mcp_sessions_per_token",
        raw.max_mcp_sessions_per_token,
        defaults.max_sessions_per_token,
        1,
    )?;
    let idle = seconds_key(
        "limits.mcp_session_idle_secs",
        raw.mcp_session_idle_secs,
        defaults.idle.max(call_timeout * 2),
        MAX_MCP_SESSION_IDLE_SECS,
    )?;
    if idle <= call_timeout {
        return Err(invalid(
            "limits.mcp_session_idle_secs",
            format!(
                "must be longer than [plugins] call_timeout_secs ({} s): a session's idle \
                 time runs while one of its tool calls does",
                call_timeout.as_secs_f64()
            ),
        ));
    }
    Ok(McpSessionLimits {
        max_sessions,
        max_sessions_per_token,
        idle,
    })
}

fn parse_http(raw: &RawServer) -> Result<HttpLimits, ConfigError> {
    let defaults = HttpLimits::default();
    let max_connections = raw.max_connections.unwrap_or(defaults.max_connections);
    if max_connections < 16 {
        return Err(invalid("server.max_connections", "must be at least 16"));
    }
    Ok(HttpLimits {
        header_read_timeout: seconds_key(
            "server.header_read_timeout_secs",
            raw.header_read_timeout_secs,
            defaults.header_read_timeout,
            3600.0,
        )?,
        idle_timeout: seconds_key(
            "server.idle_timeout_secs",
            raw.idle_timeout_secs,
            defaults.idle_timeout,
            86_400.0,
        )?,
        max_connections,
        stream_write_timeout: seconds_key(
            "server.stream_write_timeout_secs",
            raw.stream_write_timeout_secs,
            defaults.stream_write_timeout,
            3600.0,
        )?,
    })
}

fn parse_budgets(raw: &RawLimits, max_result_bytes: usize) -> Result<RunBudgets, ConfigError> {
    let defaults = RunBudgets::default();
    let at_least = |key: &str, value: Option<usize>, default: usize, min: usize| {
        at_least(&format!("limits.{key}"), value, default, min)
    };
    let budgets = RunBudgets {
        max_tool_calls_per_turn: at_least(
            "max_tool_calls_per_turn",
            raw.max_tool_calls_per_turn,
            defaults.max_tool_calls_per_turn,
            1,
        )?,
        max_turn_result_bytes: at_least(
            "max_turn_result_bytes",
            raw.max_turn_result_bytes,
            defaults.max_turn_result_bytes.max(max_result_bytes),
            max_result_bytes,
        )?,
        max_run_result_bytes: at_least(
            "max_run_result_bytes",
            raw.max_run_result_bytes,
            defaults.max_run_result_bytes.max(max_result_bytes),
            max_result_bytes,
        )?,
        max_model_turn_bytes: at_least(
            "max_model_turn_bytes",
            raw.max_model_turn_bytes,
            defaults.max_model_turn_bytes,
            4096,
        )?,
        max_conversation_bytes: at_least(
            "max_conversation_bytes",
            raw.max_conversation_bytes,
            defaults.max_conversation_bytes,
            64 * 1024,
        )?,
    };
    if budgets.max_run_result_bytes < budgets.max_turn_result_bytes {
        return Err(invalid(
            "limits.max_run_result_bytes",
            "must be at least limits.max_turn_result_bytes",
        ));
    }
    Ok(budgets)
}

fn parse_rojo(
    name: &str,
    raw: &RawRojo,
    providers: &BTreeMap<String, ProviderConfig>,
) -> Result<RojoConfig, ConfigError> {
    let key = format!("rojos.{name}");
    let candidates = match &raw.provider {
        RawNames::One(name) => vec![name.clone()],
        RawNames::List(list) => list.clone(),
    };
    if candidates.is_empty() {
        return Err(invalid(
            format!("{key}.provider"),
            "name at least one provider",
        ));
    }
    if let Some(unknown) = candidates.iter().find(|c| !providers.contains_key(*c)) {
        let known: Vec<&str> = providers.keys().map(String::as_str).collect();
        return Err(invalid(
            format!("{key}.provider"),
            format!(
                "no provider named {unknown:?} (the file declares: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    let tools = match &raw.tools {
        RawNames::One(s) if s == "*" => ToolSelection::All,
        RawNames::One(s) => ToolSelection::Only(BTreeSet::from([s.clone()])),
        RawNames::List(list) if list.iter().any(|t| t == "*") => ToolSelection::All,
        RawNames::List(list) => ToolSelection::Only(list.iter().cloned().collect()),
    };
    let Some(max_steps) = NonZeroU32::new(raw.max_steps.unwrap_or(12)) else {
        return Err(invalid(format!("{key}.max_steps"), "must be at least 1"));
    };
    Ok(RojoConfig {
        providers: candidates,
        system_prompt: raw.system_prompt.as_deref().map(Arc::from),
        tools,
        max_steps,
        approve: approve::parse(name, raw.approve.as_ref())?,
        context_tokens: provider::context_tokens(&key, raw.context_tokens)?,
        compact_at_percent: match raw.compact_at_percent {
            Some(p) if p > 100 => {
                return Err(invalid(
                    format!("{key}.compact_at_percent"),
                    "must be 0 (never compact) to 100",
                ))
            }
            p => p.unwrap_or(crate::agent::context::DEFAULT_COMPACT_AT_PERCENT),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[server]
bind = "127.0.0.1:9000"
storage = "data"

[[auth.tokens]]
token_env = "TEST_TOKEN"
projects = ["demo", "other"]

[plugins]
load = ["libs/liba.so", "/abs/libb.so"]
dir = "plugins.d"

[providers.local]
base_url = "http://127.0.0.1:11434/v1"
model = "qwen2.5:7b"
api_key_env = "TEST_KEY"

[rojos.default]
provider = "local"
tools = ["list_files"]
"#;

    fn env(name: &str) -> Option<String> {
        match name {
            "TEST_TOKEN" => Some("tok-123456789".into()),
            "TEST_KEY" => Some("sk-secret".into()),
            _ => None,
        }
    }

    fn parse_file(text: &str) -> Result<ConfigFile, ConfigError> {
        ConfigFile::parse(
            text,
            Path::new("/etc/rojos/rojos.toml"),
            Path::new("/etc/rojos"),
            &env,
        )
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        parse_file(text).map(|file| file.config)
    }

    fn parse_live(text: &str) -> Result<LiveConfig, ConfigError> {
        parse_file(text).map(|file| file.live)
    }

    fn error(text: &str) -> String {
        parse(text)
            .expect_err("config should be refused")
            .to_string()
    }

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.storage, Path::new("/etc/rojos/data"));
        assert_eq!(
            c.plugins.load,
            vec![
                PathBuf::from("/etc/rojos/libs/liba.so"),
                PathBuf::from("/abs/libb.so")
            ]
        );
        assert_eq!(
            c.plugins.dir.as_deref(),
            Some(Path::new("/etc/rojos/plugins.d"))
        );
        assert_eq!(c.bind.port(), 9000);
    }

    #[test]
    fn secrets_come_from_the_environment_and_stay_redacted() {
        let ConfigFile { config: c, live } = parse_file(GOOD).unwrap();
        assert_eq!(c.tokens[0].token.expose(), "tok-123456789");
        assert_eq!(
            live.providers["local"]
                .provider
                .api_key
                .as_ref()
                .unwrap()
                .expose(),
            "sk-secret"
        );
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("tok-123456789") && !debug.contains("sk-secret"),
            "{debug}"
        );
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_it() {
        let e = error("[server]\nbnd = \"127.0.0.1:1\"\n");
        assert!(e.contains("unknown field `bnd`"), "{e}");
        let e = error("[rojos.default]\nprovider = \"x\"\ntols = []\n");
        assert!(e.contains("unknown field `tols`"), "{e}");
    }

    #[test]
    fn a_bad_value_is_an_error_naming_the_key() {
        let e = error(&GOOD.replace("127.0.0.1:9000", "nowhere"));
        assert_eq!(e, r#"server.bind: not a socket address: "nowhere""#);
        let e = error(&GOOD.replace("provider = \"local\"", "provider = \"locl\""));
        assert_eq!(
            e,
            r#"rojos.default.provider: no provider named "locl" (the file declares: local)"#
        );
        let e = error(&GOOD.replace("provider = \"local\"", "provider = []"));
        assert_eq!(e, "rojos.default.provider: name at least one provider");
        let e = error(&GOOD.replace("\"demo\", \"other\"", "\"../etc\""));
        assert!(e.starts_with("auth.tokens[0].projects:"), "{e}");
        let e = error(&GOOD.replace("[plugins]", "[limits]\nmax_read_bytes = 0\n[plugins]"));
        assert_eq!(e, "limits.max_read_bytes: must be at least 1");
        let e = error(&GOOD.replace("[plugins]", "[plugins]\ncall_timeout_secs = \"ten\""));
        assert!(e.contains("call_timeout_secs"), "{e}");
    }

    #[test]
    fn a_missing_key_leaves_the_provider_configured_but_unusable() {
        let live = parse_live(&GOOD.replace("TEST_KEY", "MISSING_KEY")).unwrap();
        let local = &live.providers["local"];
        assert_eq!(local.key_env.as_deref(), Some("MISSING_KEY"));
        assert!(local.missing_key);
        assert!(local.provider.api_key.is_none());
        let live = parse_live(GOOD).unwrap();
        assert!(!live.providers["local"].missing_key);
    }

    #[test]
    fn a_kind_fills_in_url_key_variable_model_and_quirks() {
        let file = |provider: &str| {
            format!("[providers.p]\n{provider}\n[rojos.default]\nprovider = \"p\"\n")
        };
        let live = parse_live(&file("kind = \"gemini\"")).unwrap();
        let gemini = &live.providers["p"];
        assert_eq!(gemini.kind, Some(rojos_llm::ProviderKind::Gemini));
        assert_eq!(
            gemini.provider.base_url,
            rojos_llm::ProviderKind::Gemini.base_url()
        );
        assert_eq!(gemini.provider.model, "gemini-2.5-flash");
        assert_eq!(gemini.key_env.as_deref(), Some("GEMINI_API_KEY"));
        assert!(gemini.missing_key);
        assert_eq!(
            gemini.provider.empty_content,
            rojos_llm::EmptyContent::EmptyString
        );

        let given = "kind = \"openai\"\nbase_url = \"http://proxy:9/v1\"\nmodel = \"m\"\napi_key_env = \"TEST_KEY\"";
        let live = parse_live(&file(given)).unwrap();
        let openai = &live.providers["p"];
        assert_eq!(openai.provider.base_url, "http://proxy:9/v1");
        assert_eq!(openai.provider.model, "m");
        assert!(!openai.missing_key);

        let live = parse_live(&file("kind = \"ollama\"")).unwrap();
        let ollama = &live.providers["p"];
        assert!(ollama.model_from_list && ollama.key_env.is_none() && !ollama.missing_key);
        assert_eq!(ollama.provider.base_url, "http://127.0.0.1:11434/v1");

        let e = error(&file("kind = \"olama\""));
        assert!(
            e.starts_with("providers.p.kind: unknown kind \"olama\" (known: openai, anthropic,"),
            "{e}"
        );
        let e = error(&file("model = \"m\""));
        assert!(e.starts_with("providers.p.base_url: missing"), "{e}");
        let e = error(&file("base_url = \"http://h/v1\""));
        assert!(e.starts_with("providers.p.model: missing"), "{e}");
    }

    #[test]
    fn a_rojo_may_name_several_providers_in_order() {
        let text = GOOD.replace("provider = \"local\"", "provider = [\"local\", \"spare\"]")
            + "[providers.spare]\nkind = \"lmstudio\"\n";
        let live = parse_live(&text).unwrap();
        assert_eq!(live.rojos["default"].providers, ["local", "spare"]);
    }

    #[test]
    fn a_refused_base_url_is_named_without_its_key() {
        let e = error(&GOOD.replace(
            "http://127.0.0.1:11434/v1",
            "ftp://me:pa55word@h/v1?key=AIza-secret",
        ));
        assert_eq!(
            e,
            r#"providers.local.base_url: must start with http:// or https://, got "ftp://<redacted>@h/v1?key=<redacted>""#
        );
        let e = error(&GOOD.replace("http://127.0.0.1:11434/v1", "http://?key=AIza-secret"));
        assert!(!e.contains("AIza-secret"), "{e}");
    }

    #[test]
    fn tools_accept_a_star_or_a_list_and_unknown_names_are_refused() {
        let c = parse_live(GOOD).unwrap();
        assert_eq!(
            c.rojos["default"].tools,
            ToolSelection::Only(BTreeSet::from(["list_files".to_owned()]))
        );
        let star =
            parse_live(&GOOD.replace(r#"tools = ["list_files"]"#, r#"tools = "*""#)).unwrap();
        assert_eq!(star.rojos["default"].tools, ToolSelection::All);
        assert!(c.check_tools(&["list_files"], &[]).is_ok());
        let e = c
            .check_tools(&["delete_path", "move_path"], &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            r#"rojos.default.tools: no loaded plugin provides a tool named "list_files" (loaded: delete_path, move_path)"#
        );
    }

    #[test]
    fn chat_limits_are_read_and_checked() {
        let c = parse(
            &GOOD
                .replace(
                    "storage = \"data\"",
                    "storage = \"data\"\nmax_concurrent_chats = 16",
                )
                .replace(
                    "[[auth.tokens]]",
                    "[auth]\nrate_limit_per_minute = 30\n\n[[auth.tokens]]",
                ),
        )
        .unwrap();
        assert_eq!(c.max_concurrent_chats, 16);
        assert_eq!(c.rate_limit_per_minute, Some(30));
        let defaults = parse("").unwrap();
        assert_eq!(defaults.max_concurrent_chats, 1024);
        assert_eq!(defaults.rate_limit_per_minute, None);
        let e = error("[server]\nmax_concurrent_chats = 0\n");
        assert_eq!(e, "server.max_concurrent_chats: must be at least 1");
        let e = error("[auth]\nrate_limit_per_minute = 0\n");
        assert_eq!(
            e,
            "auth.rate_limit_per_minute: must be at least 1 (leave it out for no rate limit)"
        );
        let e = error("[auth]\nrate_limit_per_minute = -1\n");
        assert!(e.contains("rate_limit_per_minute"), "{e}");
    }

    #[test]
    fn worker_threads_default_to_one_per_core_and_take_a_count_from_one_to_1024() {
        assert_eq!(parse("").unwrap().worker_threads, None);
        let one = parse("[server]\nworker_threads = 1\n").unwrap();
        assert_eq!(one.worker_threads, NonZeroUsize::new(1));
        let most = parse("[server]\nworker_threads = 1024\n").unwrap();
        assert_eq!(most.worker_threads, NonZeroUsize::new(1024));
        for refused in ["0", "1025"] {
            let e = error(&format!("[server]\nworker_threads = {refused}\n"));
            assert_eq!(e, "server.worker_threads: must be between 1 and 1024");
        }
        let e = error("[server]\nworker_threads = -1\n");
        assert!(e.contains("worker_threads"), "{e}");
    }

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let c = parse("").unwrap();
        assert_eq!(c.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.plugins.call_timeout, Duration::from_secs(10));
        assert!(c.tokens.is_empty() && parse_live("").unwrap().rojos.is_empty());
        assert_eq!(c.http, HttpLimits::default());
        assert_eq!(c.budgets, RunBudgets::default());
        assert_eq!(c.max_chats_per_token, 32);
        assert_eq!(c.max_conversation_page_bytes, 1 << 20);
        assert_eq!(c.max_upload_bytes, 10 << 20);
        assert_eq!(c.transfers, TransferLimits::default());
    }

    #[test]
    fn the_transfer_limits_are_read_and_checked() {
        let c = parse(
            "[limits]\nbody_timeout_secs = 2.5\nmax_transfers = 3\nmax_transfers_per_token = 2\n",
        )
        .unwrap();
        assert_eq!(
            c.transfers,
            TransferLimits {
                body_timeout: Duration::from_millis(2500),
                max_transfers: 3,
                max_transfers_per_token: 2,
            }
        );
        assert_eq!(c.transfers.buffered_bytes(), 3 * TRANSFER_BUFFER_BYTES);
        for (toml, expected) in [
            (
                "body_timeout_secs = 0",
                "limits.body_timeout_secs: must be between 0 and 3600 seconds",
            ),
            (
                "max_transfers = 0",
                "limits.max_transfers: must be at least 1",
            ),
            (
                "max_transfers_per_token = 0",
                "limits.max_transfers_per_token: must be at least 1",
            ),
        ] {
            let e = parse(&format!("[limits]\n{toml}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{e}");
        }
    }

    #[test]
    fn the_upload_limit_is_read_and_must_be_positive() {
        let c = parse("[limits]\nmax_upload_bytes = 2048\n").unwrap();
        assert_eq!(c.max_upload_bytes, 2048);
        let e = parse("[limits]\nmax_upload_bytes = 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("limits.max_upload_bytes: must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn the_model_turn_limit_reaches_every_provider_client() {
        let limits = |text: &str| parse_live(text).unwrap().providers["local"].provider.limits;
        let default = limits(GOOD);
        assert_eq!(default.max_turn_bytes, 2 << 20);
        assert_eq!(
            default.max_argument_bytes,
            rojos_llm::Limits::default().max_argument_bytes
        );
        let low = limits(&format!("{GOOD}\n[limits]\nmax_model_turn_bytes = 8192\n"));
        assert_eq!(low.max_turn_bytes, 8192);
        assert_eq!(
            low.max_argument_bytes, 8192,
            "one call's arguments fit in a turn"
        );
    }

    #[test]
    fn hardening_keys_are_read_and_checked() {
        let c = parse(
            "[server]\nheader_read_timeout_secs = 2.5\nidle_timeout_secs = 5\nmax_connections = 100\n\
             stream_write_timeout_secs = 3\nmax_chats_per_token = 4\n\
             [limits]\nmax_tool_calls_per_turn = 3\nmax_turn_result_bytes = 200000\n\
             max_run_result_bytes = 300000\nmax_model_turn_bytes = 5000\n\
             max_conversation_bytes = 70000\nmax_conversation_page_bytes = 2048\n",
        )
        .unwrap();
        assert_eq!(c.http.header_read_timeout, Duration::from_millis(2500));
        assert_eq!(c.http.idle_timeout, Duration::from_secs(5));
        assert_eq!(c.http.max_connections, 100);
        assert_eq!(c.http.stream_write_timeout, Duration::from_secs(3));
        assert_eq!(c.max_chats_per_token, 4);
        assert_eq!(
            c.budgets,
            RunBudgets {
                max_tool_calls_per_turn: 3,
                max_turn_result_bytes: 200_000,
                max_run_result_bytes: 300_000,
                max_model_turn_bytes: 5000,
                max_conversation_bytes: 70_000,
            }
        );
        assert_eq!(c.max_conversation_page_bytes, 2048);
        for (text, message) in [
            (
                "[server]\nheader_read_timeout_secs = 0\n",
                "server.header_read_timeout_secs: must be between 0 and 3600 seconds",
            ),
            (
                "[server]\nmax_connections = 3\n",
                "server.max_connections: must be at least 16",
            ),
            (
                "[server]\nmax_chats_per_token = 0\n",
                "server.max_chats_per_token: must be at least 1",
            ),
            (
                "[limits]\nmax_tool_calls_per_turn = 0\n",
                "limits.max_tool_calls_per_turn: must be at least 1",
            ),
            (
                "[limits]\nmax_turn_result_bytes = 1000\n",
                "limits.max_turn_result_bytes: must be at least 131072",
            ),
            (
                "[limits]\nmax_turn_result_bytes = 300000\nmax_run_result_bytes = 200000\n",
                "limits.max_run_result_bytes: must be at least limits.max_turn_result_bytes",
            ),
        ] {
            assert_eq!(error(text), message, "{text}");
        }
    }

    #[test]
    fn mcp_servers_are_read_with_secrets_from_the_environment() {
        let text = format!(
            "{GOOD}\n[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = {{ LEVEL = \"warn\" }}\nenv_from = {{ TOKEN = \"TEST_KEY\" }}\n"
        );
        let config = parse(&text).unwrap();
        let [server] = config.mcp_servers.as_slice() else {
            panic!("one server expected: {:?}", config.mcp_servers)
        };
        assert_eq!(server.name, "files");
        let McpTransport::Stdio(stdio) = &server.transport else {
            panic!("a command server is a stdio one: {server:?}")
        };
        assert_eq!(stdio.args, ["-y", "server"]);
        assert_eq!(stdio.env["LEVEL"].expose(), "warn");
        assert_eq!(stdio.env["TOKEN"].expose(), "sk-secret");
        assert_eq!(server.start_timeout, Duration::from_secs(30));
        assert!(!format!("{server:?}").contains("sk-secret"));
    }

    #[test]
    fn bad_mcp_servers_are_refused_naming_the_key() {
        let with = |table: &str| error(&format!("{GOOD}\n{table}"));
        assert_eq!(
            with("[mcp.servers.files]\ncommand = \"npx\"\nenv_from = { TOKEN = \"NOPE\" }"),
            "mcp.servers.files.env_from.TOKEN: the environment variable NOPE is not set"
        );
        assert_eq!(
            with("[mcp.servers.files]\ncommand = \"npx\"\nargs = [\"{project_root}\"]\nmax_running = 0"),
            "mcp.servers.files.max_running: must be 1 to 256"
        );
        assert!(
            with("[mcp.servers.files]\ncommand = \"npx\"\nidle_shutdown_secs = 5")
                .starts_with("mcp.servers.files: max_running and idle_shutdown_secs apply only")
        );
        assert!(with("[mcp.servers.a__b]\ncommand = \"x\"")
            .starts_with("mcp.servers.a__b: a server name must be"));
        assert_eq!(
            with("[mcp.servers.files]\ncommand = \" \""),
            "mcp.servers.files.command: must not be empty"
        );
    }

    #[test]
    fn url_servers_are_read_with_headers_from_the_environment() {
        let config = parse(&format!(
            "{GOOD}\n[mcp.servers.peer]\nurl = \"https://mcp.example.com/mcp\"\nheaders = {{ X-Team = \"a\" }}\nheaders_from = {{ Authorization = \"TEST_KEY\" }}\nstart_timeout_secs = 5\n"
        ))
        .unwrap();
        let [server] = config.mcp_servers.as_slice() else {
            panic!("one server expected: {:?}", config.mcp_servers)
        };
        let McpTransport::Http(http) = &server.transport else {
            panic!("a url server is an HTTP one: {server:?}")
        };
        assert_eq!(http.url, "https://mcp.example.com/mcp");
        assert_eq!(http.headers["X-Team"].expose(), "a");
        assert_eq!(http.headers["Authorization"].expose(), "sk-secret");
        assert_eq!(server.start_timeout, Duration::from_secs(5));
        assert!(server.per_project.is_none());
        assert!(!format!("{server:?}").contains("sk-secret"));
    }

    #[test]
    fn bad_url_servers_are_refused_saying_why() {
        let with = |table: &str| error(&format!("{GOOD}\n[mcp.servers.peer]\n{table}"));
        assert!(with("command = \"x\"\nurl = \"http://h/mcp\"").starts_with(
            "mcp.servers.peer: set either command (a stdio server Rojos starts) or url"
        ));
        assert!(with("args = [\"x\"]")
            .starts_with("mcp.servers.peer: set command (a stdio server Rojos starts) or url"));
        assert!(with("url = \"http://h/mcp\"\nargs = [\"x\"]").starts_with(
            "mcp.servers.peer: args, env and env_from apply only to a command server"
        ));
        assert!(
            with("url = \"http://h/mcp\"\nenv_from = { A = \"TEST_KEY\" }")
                .starts_with("mcp.servers.peer: args, env and env_from apply only")
        );
        assert!(with("command = \"x\"\nheaders = { A = \"b\" }")
            .starts_with("mcp.servers.peer: headers and headers_from apply only to a url server"));
        assert_eq!(
            with("url = \"ftp://h/mcp\""),
            "mcp.servers.peer.url: \"ftp://h/mcp\" is not an http:// or https:// URL with a host"
        );
        assert!(
            with("url = \"not a url\"").starts_with("mcp.servers.peer.url: \"not a url\" is not")
        );
        assert!(with("url = \"http://h/{project_root}/mcp\"")
            .starts_with("mcp.servers.peer: {project_root} is not replaced in a url"));
        assert_eq!(
            with("url = \"http://h/mcp\"\nheaders_from = { Authorization = \"NOPE\" }"),
            "mcp.servers.peer.headers_from.Authorization: the environment variable NOPE is not set"
        );
        assert!(
            with("url = \"http://h/mcp\"\nheaders = { \"bad name\" = \"v\" }")
                .starts_with("mcp.servers.peer.headers.bad name: is not a valid HTTP header name")
        );
    }

    #[test]
    fn a_server_wildcard_enables_only_that_servers_tools() {
        let only = ToolSelection::Only(BTreeSet::from(["files__*".to_owned(), "x".to_owned()]));
        assert!(only.allows("files__read"));
        assert!(only.allows("x"));
        assert!(!only.allows("files_read"));
        assert!(!only.allows("other__read"));
        let c =
            parse_live(&GOOD.replace(r#"tools = ["list_files"]"#, r#"tools = ["files__read"]"#))
                .unwrap();
        assert!(c.check_tools(&[], &["files"]).is_ok());
        assert!(c.check_tools(&[], &["other"]).is_err());
    }

    #[test]
    fn mcp_sessions_have_limits_and_an_idle_time_longer_than_a_call() {
        let defaults = parse(GOOD).unwrap().mcp_sessions;
        assert_eq!(defaults, McpSessionLimits::default());
        let long_calls = GOOD.replace(
            "dir = \"plugins.d\"\n",
            "dir = \"plugins.d\"\ncall_timeout_secs = 600\n",
        );
        assert_eq!(
            parse(&long_calls).unwrap().mcp_sessions.idle,
            Duration::from_secs(1200)
        );
        let set = format!(
            "{GOOD}\n[limits]\nmax_mcp_sessions = 3\nmax_mcp_sessions_per_token = 2\n\
             mcp_session_idle_secs = 30\n"
        );
        let limits = parse(&set).unwrap().mcp_sessions;
        assert_eq!(
            (
                limits.max_sessions,
                limits.max_sessions_per_token,
                limits.idle
            ),
            (3, 2, Duration::from_secs(30))
        );
        assert_eq!(
            error(&format!("{GOOD}\n[limits]\nmcp_session_idle_secs = 10\n")),
            "limits.mcp_session_idle_secs: must be longer than [plugins] call_timeout_secs \
             (10 s): a session's idle time runs while one of its tool calls does"
        );
        assert_eq!(
            error(&format!(
                "{GOOD}\n[limits]\nmax_mcp_sessions_per_token = 0\n"
            )),
            "limits.max_mcp_sessions_per_token: must be at least 1"
        );
    }
}
