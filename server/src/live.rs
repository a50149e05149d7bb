//! The configuration that applies live: rojos (their tools, prompt, provider, step limit) and
//! providers (URL, model, key, time-outs). Editing `rojos.toml` swaps in new [`Settings`] for
//! the next message; an invalid edit is logged with the key at fault and the running settings
//! stay. Server keys (`bind`, `storage`, `[auth]`, `[plugins]`, `[limits]`) need a restart.

use std::{
    collections::BTreeMap,
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use arc_swap::ArcSwap;
use rojos_watcher::{self as watcher, WatchGuard};

use rojos_agent::registry::RegistryHandle;
use rojos_config::{ConfigError, ConfigFile, LiveConfig, ProviderConfig, RojoConfig};

/// How long the config file must stay quiet after an edit before it is read.
const QUIET: Duration = Duration::from_millis(300);

/// A provider whose HTTP client cannot be built.
#[derive(Debug, thiserror::Error)]
#[error("providers.{name}: {source}")]
pub struct ProviderError {
    /// The provider's name.
    pub name: String,
    /// Why.
    pub source: rojos_llm::LlmError,
}

/// Why an edit of `rojos.toml` was not applied (the running settings stay).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file is invalid or names a tool no loaded plugin provides.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A provider's client cannot be built.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// A rojo name the settings do not have; the message lists those they have.
#[derive(Debug, thiserror::Error)]
#[error("unknown rojo {name:?} (this server has: {known})")]
pub struct UnknownRojo {
    /// The name asked for.
    pub name: String,
    /// The configured rojos, comma-separated.
    pub known: String,
}

/// One consistent set of live settings.
#[derive(Debug)]
pub struct Settings {
    /// Assistants, by name.
    pub rojos: BTreeMap<String, RojoConfig>,
    /// The providers, by name.
    pub providers: BTreeMap<String, LiveProvider>,
}

/// One provider: its configuration and its HTTP client.
#[derive(Debug)]
pub struct LiveProvider {
    /// As configured.
    pub config: ProviderConfig,
    /// Its client; `None` while its model is still to be taken from the server's list.
    pub client: Option<rojos_llm::Client>,
    /// What identifies this configuration to the provider status board, from `config` and
    /// `client` as built: neither changes afterwards (an edit of `rojos.toml` builds new
    /// settings).
    fingerprint: u64,
    /// Its endpoint's `host[:port]`, as messages name it (`providers::ProviderRef`):
    /// found once here, where every chat parsed the URL again.
    host: String,
}

impl LiveProvider {
    /// The provider `config` with `client` (`None` while its model is to be taken from the
    /// server's list).
    pub fn new(config: ProviderConfig, client: Option<rojos_llm::Client>) -> Self {
        let fingerprint = fingerprint(&config, client.is_some());
        let host = endpoint_host(&config.provider.base_url);
        Self {
            config,
            client,
            fingerprint,
            host,
        }
    }

    /// Its endpoint's `host[:port]` (never a path, query or key).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// What identifies this configuration (and whether it has its client yet) to the provider
    /// status board: a different one is checked afresh.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The client, when the provider can be used as configured (its key is set and its model
    /// known).
    pub fn usable_client(&self) -> Option<&rojos_llm::Client> {
        self.client.as_ref().filter(|_| !self.config.missing_key)
    }
}

/// What identifies a provider's configuration: any change (URL, model, key, headers,
/// time-outs) makes it a new one, checked afresh. Never shown. Computed once per
/// configuration ([`LiveProvider::new`]): it formats the whole configuration, and every chat
/// asks the board about its rojo's providers.
fn fingerprint(config: &ProviderConfig, has_client: bool) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // `Debug` shows every setting but the secrets, which are added one by one.
    format!("{:?}", config.provider).hash(&mut hasher);
    config
        .provider
        .api_key
        .as_ref()
        .map(|key| key.expose())
        .hash(&mut hasher);
    config.provider.headers.hash(&mut hasher);
    config.provider.base_url.hash(&mut hasher);
    (
        config.kind,
        &config.key_env,
        config.missing_key,
        config.model_from_list,
    )
        .hash(&mut hasher);
    has_client.hash(&mut hasher);
    hasher.finish()
}

/// The `host[:port]` of `base_url` as errors name it, or the redacted URL when it does not
/// parse.
pub(crate) fn endpoint_host(base_url: &str) -> String {
    rojos_llm::chat_completions_url(base_url).map_or_else(
        |_| rojos_llm::display_url(base_url),
        |url| rojos_llm::endpoint_host(&url),
    )
}

impl Settings {
    /// Builds the settings of `config` (one HTTP client per provider).
    ///
    /// # Errors
    ///
    /// [`ProviderError`] naming a provider whose client cannot be built.
    pub fn from_config(config: &LiveConfig) -> Result<Settings, ProviderError> {
        let providers = config
            .providers
            .iter()
            .map(|(name, p)| {
                let client = if p.model_from_list {
                    None
                } else {
                    Some(
                        rojos_llm::Client::new(p.provider.clone()).map_err(|source| {
                            ProviderError {
                                name: name.clone(),
                                source,
                            }
                        })?,
                    )
                };
                let live = LiveProvider::new(p.clone(), client);
                Ok((name.clone(), live))
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings {
            rojos: config.rojos.clone(),
            providers,
        })
    }

    /// The rojo called `name`.
    ///
    /// # Errors
    ///
    /// [`UnknownRojo`], listing the rojos there are.
    pub fn rojo(&self, name: &str) -> Result<&RojoConfig, UnknownRojo> {
        self.rojos.get(name).ok_or_else(|| UnknownRojo {
            name: name.to_owned(),
            known: self.rojos.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }
}

/// The current settings, swapped as a whole.
#[derive(Debug)]
pub struct Live {
    current: ArcSwap<Settings>,
    /// Told of each reload, so the providers that changed are checked at once.
    reloads: tokio::sync::Notify,
    /// Marked at each reload, for any number of watchers (MCP sessions whose rojo's tools
    /// may have changed: the crate `rojos-mcp-server`, through `mcp::Rojos`).
    changes: tokio::sync::watch::Sender<()>,
}

impl Live {
    /// Live settings starting from `settings`.
    pub fn new(settings: Settings) -> Live {
        Live {
            current: ArcSwap::from_pointee(settings),
            reloads: tokio::sync::Notify::new(),
            changes: tokio::sync::watch::Sender::new(()),
        }
    }

    /// A receiver that sees each later reload.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.subscribe()
    }

    /// Completes after the next reload (at once if one happened since the last call).
    pub async fn reloaded(&self) {
        self.reloads.notified().await;
    }

    /// The current settings: take them once per message.
    pub fn settings(&self) -> Arc<Settings> {
        self.current.load_full()
    }

    /// Re-reads `path` and swaps in its settings.
    ///
    /// # Errors
    ///
    /// The config is invalid (the message names the key) or names a tool no loaded plugin
    /// provides; the running settings stay.
    pub fn reload(&self, path: &Path, registry: &RegistryHandle) -> Result<(), ReloadError> {
        let config = ConfigFile::load(path)?.live;
        let tools = registry.snapshot();
        config.check_tools(&tools.names(), &registry.mcp_servers())?;
        self.current
            .store(Arc::new(Settings::from_config(&config)?));
        self.reloads.notify_one();
        self.changes.send_replace(());
        Ok(())
    }

    /// Watches the config file on a thread of its own and reloads it after each edit. The
    /// watch is in place when this returns, so an edit made right after the start is seen.
    /// The folder holding the file is watched, not the file itself: editors save by writing a
    /// new file and renaming it.
    pub fn watch(self: &Arc<Self>, path: PathBuf, registry: Arc<RegistryHandle>) -> WatchGuard {
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_owned();
        let options = watcher::Options {
            quiet: QUIET,
            rescan: None,
            thread: "rojos-config-watch",
            only: path.file_name().map(ToOwned::to_owned),
        };
        let edits = ConfigEdits {
            live: Arc::clone(self),
            path,
            registry,
        };
        watcher::spawn(folder, options, edits)
    }
}

/// Reloads the config file when it has settled after an edit.
struct ConfigEdits {
    live: Arc<Live>,
    path: PathBuf,
    registry: Arc<RegistryHandle>,
}

impl watcher::Handler for ConfigEdits {
    fn settled(&mut self, paths: Vec<PathBuf>) {
        let name = self.path.file_name();
        if !paths.iter().any(|p| p.file_name() == name) {
            return; // another file of the same folder
        }
        let config = self.path.display();
        match self.live.reload(&self.path, &self.registry) {
            Ok(()) => tracing::info!(config = %config, "configuration reloaded"),
            Err(e) => {
                tracing::warn!(config = %config, "configuration not reloaded, the running one stays: {e}")
            }
        }
    }

    fn cannot_watch(&mut self, _folder: &Path, error: &watcher::Error) {
        tracing::warn!(error = %error, config = %self.path.display(), "cannot watch the config file; edits need a restart");
    }
}
