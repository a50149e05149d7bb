//! `AppState`: everything a request handler needs, built once at start from the config:
//! the opened storage, the plugin loader, the MCP servers and the tool registry, the token
//! table, the conversation store and the agent that runs chats.

use std::sync::Arc;

use rojos_agent::registry::{RegisteredTool, Registry, RegistryHandle, ToolSources};
use rojos_agent::Agent;
use rojos_config::{Config, ConfigError, ConfigFile};
use rojos_conversations::StoreError;
use rojos_mcp_client::McpClients;
use rojos_metrics::Metrics;
use rojos_plugin_host::{check_folder, DropIn, FolderError, LoadError, Loader};
use rojos_project_storage::Storage;
use rojos_watcher::WatchGuard;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    http::{auth::Auth, limits::ChatLimits, search_slots::SearchSlots, transfers::TransferSlots},
    live::{Live, ProviderError, Settings},
    providers::status::StatusBoard,
};

/// The folder under the storage directory that keeps quarantine records
/// (`rojos_plugin_worker::record`): a name no project id can take (they start with a letter
/// or digit).
pub const QUARANTINE_RECORDS: &str = ".quarantine";

/// Shared server state; cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The keys read once at start; the rojos and providers are only in `live`.
    pub config: Arc<Config>,
    /// The current tool registry.
    pub registry: Arc<RegistryHandle>,
    /// Project storage.
    pub storage: Arc<Storage>,
    /// Who may call the API.
    pub auth: Arc<Auth>,
    /// The plugin loader (keeps every loaded library's private copy).
    pub loader: Arc<Loader>,
    /// Runs chats.
    pub agent: Arc<Agent>,
    /// The counters `GET /metrics` renders (the agent holds the same value).
    pub metrics: Arc<Metrics>,
    /// How many chats may stream at once (in all, and per token), and how often each token
    /// may start one.
    pub limits: Arc<ChatLimits>,
    /// How many file uploads and downloads may run at once (in all, and per token).
    pub transfers: Arc<TransferSlots>,
    /// The tokens with a conversation search running (one at a time per token).
    pub searches: Arc<SearchSlots>,
    /// The rojos and providers, reloaded when `rojos.toml` changes.
    pub live: Arc<Live>,
    /// What the provider checks found. The checks themselves run only under
    /// [`crate::serve`], so `rojos check` and `rojos tools` contact no provider.
    pub statuses: Arc<StatusBoard>,
    /// The MCP servers used as tool sources; stopped when the last state is dropped.
    pub mcp: Arc<McpClients>,
    /// Stops the drop-in folder and config watchers when the last state is dropped.
    _watchers: Arc<Vec<WatchGuard>>,
}

/// The token table, as the [`crate::http::auth::Caller`] extractor reads it.
impl axum::extract::FromRef<AppState> for Arc<Auth> {
    fn from_ref(state: &AppState) -> Arc<Auth> {
        Arc::clone(&state.auth)
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The storage folder cannot be opened.
    #[error("storage '{path}': {source}")]
    Storage {
        /// The configured folder.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// One or more `[plugins].load` entries failed to load.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Plugins(Vec<LoadError>),
    /// The conversation database cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A provider's client cannot be built.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The drop-in folder is unusable or unsafe.
    #[error(transparent)]
    DropIn(#[from] FolderError),
    /// Any other I/O failure at start.
    #[error("cannot start: {0}")]
    Io(#[from] std::io::Error),
}

impl AppState {
    /// Opens storage, loads the configured plugins and checks every rojo's tools.
    ///
    /// # Errors
    ///
    /// [`StartError`] naming what is wrong; every plugin that failed is listed.
    pub fn start(file: ConfigFile) -> Result<AppState, StartError> {
        let loader = Arc::new(Loader::new(file.config.plugins.max_concurrent_calls)?);
        AppState::start_with(file, loader)
    }

    /// [`AppState::start`] with an existing loader, so libraries it already loaded are not
    /// loaded again (a loaded library is never unloaded).
    ///
    /// # Errors
    ///
    /// [`StartError`] naming what is wrong; every plugin that failed is listed.
    pub fn start_with(file: ConfigFile, loader: Arc<Loader>) -> Result<AppState, StartError> {
        let ConfigFile { config, live } = file;
        loader.configure_workers(
            config.plugins.sandbox,
            config.plugins.worker_idle,
            config.plugins.worker_start,
            config.plugins.quarantine,
            Some(config.storage.join(QUARANTINE_RECORDS)),
        );
        let storage = Storage::open(&config.storage).map_err(|source| StartError::Storage {
            path: config.storage.display().to_string(),
            source,
        })?;
        let plugins = load_builtins(&config, &loader)?;
        let mcp = McpClients::start(&config.mcp_servers)?;
        let mcp_servers = mcp.server_names().into_iter().map(str::to_owned).collect();
        let registry = Arc::new(RegistryHandle::with_mcp_servers(
            Registry::default(),
            mcp_servers,
        ));
        let sources = Arc::new(ToolSources::new(
            plugins,
            mcp.listed_tools(),
            Arc::clone(&registry),
        ));
        // Each server's later lists (list_changed, a restart, a late start) replace its tools.
        let for_mcp = Arc::clone(&sources);
        mcp.follow_tool_lists(move |server, tools| for_mcp.set_mcp_tools(server, tools));
        let mut watchers = Vec::new();
        if let Some(dir) = &config.plugins.dir {
            watchers.push(watch_dropins(dir, &loader, sources)?);
        }
        let tools = registry.snapshot();
        live.check_tools(&tools.names(), &registry.mcp_servers())?;
        let live = Arc::new(Live::new(Settings::from_config(&live)?));
        if config.path.is_file() {
            watchers.push(live.watch(config.path.clone(), Arc::clone(&registry)));
        }
        let storage = Arc::new(storage);
        let metrics = Arc::new(Metrics::new());
        let agent = agent(&config, &registry, &storage, &metrics)?;
        let limits = Arc::new(
            ChatLimits::new(config.max_concurrent_chats, config.rate_limit_per_minute)
                .with_per_token(config.max_chats_per_token),
        );
        let transfers = Arc::new(TransferSlots::new(&config.transfers));
        Ok(AppState {
            auth: Arc::new(Auth::from_config(&config.tokens)),
            config: Arc::new(config),
            registry,
            storage,
            loader,
            agent: Arc::new(agent),
            metrics,
            limits,
            transfers,
            searches: Arc::new(SearchSlots::default()),
            live,
            statuses: Arc::new(StatusBoard::default()),
            mcp: Arc::new(mcp),
            _watchers: Arc::new(watchers),
        })
    }
}

/// Loads every `[plugins].load` library; all must load, with no two giving one tool name.
fn load_builtins(config: &Config, loader: &Loader) -> Result<Vec<RegisteredTool>, StartError> {
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for path in &config.plugins.load {
        match loader.load_as(path, config.plugins.isolation) {
            Ok(tool) => loaded.push(tool),
            Err(e) => errors.push(e),
        }
    }
    let loaded: Vec<RegisteredTool> = loaded.into_iter().map(RegisteredTool::Plugin).collect();
    let (_, duplicates) = Registry::build(loaded.iter().cloned());
    errors.extend(duplicates);
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(StartError::Plugins(errors))
    }
}

/// Checks the drop-in folder, loads what it holds into `sources` beside the plugins and MCP
/// tools (which win a name clash, then drop-ins in file-name order), and watches it.
fn watch_dropins(
    dir: &std::path::Path,
    loader: &Arc<Loader>,
    sources: Arc<ToolSources>,
) -> Result<WatchGuard, StartError> {
    check_folder(dir)?;
    let mut dropin = DropIn::new(
        dir.to_owned(),
        Arc::clone(loader),
        Box::new(move |dropins| sources.set_dropins(dropins)),
    );
    dropin.scan();
    Ok(dropin.spawn())
}

/// The agent that runs chats: the conversation store `[store]` chooses opened (and
/// migrated), with its run leases.
fn agent(
    config: &Config,
    registry: &Arc<RegistryHandle>,
    storage: &Arc<Storage>,
    metrics: &Arc<Metrics>,
) -> Result<Agent, StartError> {
    let opened = crate::store::open(&config.store)?;
    Ok(Agent {
        registry: Arc::clone(registry),
        store: opened.store,
        leases: opened.leases,
        approvals: rojos_agent::ApprovalDesk::new(opened.approvals, config.approval_timeout),
        run_lease: config.run_lease,
        storage: Arc::clone(storage),
        limits: config.limits,
        call_timeout: config.plugins.call_timeout,
        max_result_bytes: config.max_result_bytes,
        budgets: config.budgets,
        shutdown: CancellationToken::new(),
        tasks: TaskTracker::new(),
        metrics: Arc::clone(metrics),
        checkpoints: Arc::new(rojos_checkpoints::Checkpoints::new(
            Arc::clone(storage),
            rojos_checkpoints::CheckpointLimits {
                budget: config.checkpoint_bytes as u64,
                record_bytes: config.checkpoint_record_bytes as u64,
                memory_bytes: config.checkpoint_memory_bytes as u64,
            },
        )),
        feeds: Arc::new(rojos_agent::Feeds::new(config.unattended_run)),
        windows: Arc::default(),
        // `[store] share_runs = false`: nothing published, nothing followed from elsewhere.
        shared_feeds: opened.shared_feeds.filter(|_| config.share_runs),
    })
}
