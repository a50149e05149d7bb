//! The configuration that applies live: rojos (their tools, prompt, provider, step limit) and
//! providers (URL, model, key, time-outs). Editing `rojos.toml` swaps in new [`Settings`] for
//! the next message; an invalid edit is logged with the key at fault and the running settings
//! stay. Server keys (`bind`, `storage`, `[auth]`, `[plugins]`, `[limits]`) need a restart.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use notify::{RecursiveMode, Watcher};

use crate::{
    config::{Config, RojoConfig},
    plugins::WatchGuard,
    registry::RegistryHandle,
    state::StartError,
};

/// How long the config file must stay quiet after an edit before it is read.
const QUIET: Duration = Duration::from_millis(300);

/// One consistent set of live settings.
#[derive(Debug)]
pub struct Settings {
    /// Assistants, by name.
    pub rojos: BTreeMap<String, RojoConfig>,
    /// One client per provider, by name.
    pub providers: BTreeMap<String, rojos_llm::Client>,
}

impl Settings {
    /// Builds the settings of `config` (one HTTP client per provider).
    ///
    /// # Errors
    ///
    /// [`StartError::Provider`] naming a provider whose client cannot be built.
    pub fn from_config(config: &Config) -> Result<Settings, StartError> {
        let providers = config
            .providers
            .iter()
            .map(|(name, p)| {
                rojos_llm::Client::new(p.client.clone())
                    .map(|client| (name.clone(), client))
                    .map_err(|source| StartError::Provider {
                        name: name.clone(),
                        source,
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Settings {
            rojos: config.rojos.clone(),
            providers,
        })
    }
}

/// The current settings, swapped as a whole.
#[derive(Debug)]
pub struct Live {
    current: ArcSwap<Settings>,
}

impl Live {
    /// Live settings starting from `settings`.
    pub fn new(settings: Settings) -> Live {
        Live {
            current: ArcSwap::from_pointee(settings),
        }
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
    pub fn reload(&self, path: &Path, registry: &RegistryHandle) -> Result<(), StartError> {
        let config = Config::load(path)?;
        let tools = registry.snapshot();
        config.check_tools(&|name| tools.get(name).is_some())?;
        self.current
            .store(Arc::new(Settings::from_config(&config)?));
        Ok(())
    }

    /// Watches the config file on a thread of its own and reloads it after each edit. The
    /// watch is in place when this returns: an edit made right after start is not missed (on a
    /// busy machine the thread may start well after the first edit).
    pub fn watch(self: &Arc<Self>, path: PathBuf, registry: Arc<RegistryHandle>) -> WatchGuard {
        let (guard, stop) = WatchGuard::new();
        let (tx, rx) = mpsc::channel();
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Watch the folder, not the file: editors save by writing a new file and renaming it.
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let _ = tx.send(event);
        })
        .and_then(|mut w| w.watch(folder, RecursiveMode::NonRecursive).map(|()| w));
        let watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, config = %path.display(), "cannot watch the config file; edits need a restart");
                return guard;
            }
        };
        let live = Arc::clone(self);
        std::thread::Builder::new()
            .name("rojos-config-watch".to_owned())
            .spawn(move || {
                let _watcher = watcher;
                live.watch_loop(&path, &registry, &rx, &stop);
            })
            .expect("the config watcher thread starts");
        guard
    }

    fn watch_loop(
        &self,
        path: &Path,
        registry: &RegistryHandle,
        rx: &mpsc::Receiver<notify::Result<notify::Event>>,
        stop: &AtomicBool,
    ) {
        let file_name = path.file_name().map(ToOwned::to_owned);
        let mut due: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(event))
                    if event
                        .paths
                        .iter()
                        .any(|p| p.file_name() == file_name.as_deref()) =>
                {
                    if !matches!(event.kind, notify::EventKind::Access(_)) {
                        due = Some(Instant::now() + QUIET);
                    }
                }
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            if due.is_some_and(|at| Instant::now() >= at) {
                due = None;
                match self.reload(path, registry) {
                    Ok(()) => tracing::info!(config = %path.display(), "configuration reloaded"),
                    Err(e) => {
                        tracing::warn!(config = %path.display(), "configuration not reloaded, the running one stays: {e}")
                    }
                }
            }
        }
    }
}
