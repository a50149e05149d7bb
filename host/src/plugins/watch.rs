//! The drop-in folder (`[plugins].dir`): a plugin library moved in is loaded and offered on
//! the next model turn, a replaced one serves its new version, a removed one is unregistered.
//!
//! No single file-system event means "write complete" (a copy or a build shows as several
//! events, with a half-written file between them), so each path gets a quiet period after its
//! last event and is then reconciled with what is on disk. The folder
//! is also rescanned periodically (a deleted folder silently ends the watch; it is watched
//! again when it reappears). Files are fingerprinted, so a rescan reloads nothing unchanged.
//!
//! Before anything is loaded, the folder and every folder above it must pass the `trust` rule,
//! at every scan, not only at start: from a folder that turns unsafe nothing new is loaded (one
//! log line), and tools already loaded from it stay, since their code was checked when it was
//! read and runs from the loader's private copies (docs/configuration.md, "The drop-in folder").
//! Built-in plugins (`[plugins].load`) always win a name clash, then drop-ins in file-name
//! order; every loser and every bad file is logged once.

use std::{
    collections::{BTreeMap, HashSet},
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    time::{Duration, Instant},
};

use notify::{event::AccessKind, EventKind, RecursiveMode, Watcher};

use super::{
    trust::{self, Refusal},
    LoadError, LoadFailure, Loader, Tool,
};
use crate::registry::{Registry, RegistryHandle};

/// How long a path must stay quiet before it is loaded.
const QUIET: Duration = Duration::from_millis(400);
/// How often the whole folder is rescanned, whatever the events said.
const RESCAN: Duration = Duration::from_secs(2);

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    ino: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Fingerprint {
    fn of(meta: &std::fs::Metadata) -> Fingerprint {
        Fingerprint {
            len: meta.len(),
            ino: meta.ino(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }
}

struct Entry {
    fingerprint: Fingerprint,
    loaded: Result<Arc<Tool>, LoadError>,
}

/// Refuses a drop-in folder that a user other than the server's or root could write to, or
/// whose parents they could (the `trust` rule): a library's constructors run inside `dlopen`,
/// so whoever can write there runs code in the server. Creates the folder if missing.
///
/// # Errors
///
/// A message naming the folder, what is wrong and how to fix it.
pub fn check_folder(dir: &Path) -> Result<(), String> {
    // Created without group/other write whatever the umask, so a folder we make is never refused.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| format!("plugins.dir '{}': cannot create it: {e}", dir.display()))?;
    trust::check_folder(dir).map_err(|refusal| folder_problem(dir, &refusal))
}

/// The one line saying why nothing is loaded from the drop-in folder.
fn folder_problem(dir: &Path, refusal: &Refusal) -> String {
    match refusal {
        Refusal::Io(message) => format!("plugins.dir '{}': cannot check it: {message}", dir.display()),
        Refusal::Untrusted(_) => format!(
            "plugins.dir '{}' is not trusted, no plugin is loaded from it (a plugin runs code in the server): {refusal}",
            dir.display()
        ),
    }
}

/// The drop-in folder's tools and the registry they are merged into.
pub struct DropIn {
    dir: PathBuf,
    loader: Arc<Loader>,
    builtins: Vec<Arc<Tool>>,
    registry: Arc<RegistryHandle>,
    entries: BTreeMap<PathBuf, Entry>,
    reported: HashSet<String>,
    /// Why the folder was last found unsafe (logged when it changes), `None` while it is safe.
    distrusted: Option<String>,
    /// The inode of the folder being watched: a folder deleted and recreated is a new one.
    watched: Option<u64>,
}

impl std::fmt::Debug for DropIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropIn")
            .field("dir", &self.dir)
            .field("files", &self.entries.len())
            .finish()
    }
}

/// Stops the watcher thread when dropped.
#[derive(Debug)]
pub struct WatchGuard {
    stop: Arc<AtomicBool>,
}

impl WatchGuard {
    /// A guard and the flag it raises when dropped.
    pub fn new() -> (WatchGuard, Arc<AtomicBool>) {
        let stop = Arc::new(AtomicBool::new(false));
        (
            WatchGuard {
                stop: Arc::clone(&stop),
            },
            stop,
        )
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl DropIn {
    /// A drop-in folder whose tools join `builtins` (which win any name clash) in `registry`.
    pub fn new(
        dir: PathBuf,
        loader: Arc<Loader>,
        builtins: Vec<Arc<Tool>>,
        registry: Arc<RegistryHandle>,
    ) -> DropIn {
        DropIn {
            dir,
            loader,
            builtins,
            registry,
            entries: BTreeMap::new(),
            reported: HashSet::new(),
            distrusted: None,
            watched: None,
        }
    }

    /// Reconciles every file of the folder with what is loaded, then publishes the registry.
    /// Nothing is loaded while the folder is not trusted; removed files are still forgotten.
    pub fn scan(&mut self) {
        let (mut present, may_load): (Vec<PathBuf>, bool) = match std::fs::read_dir(&self.dir) {
            Ok(entries) => (
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| is_candidate(p))
                    .collect(),
                self.folder_is_trusted(),
            ),
            Err(_) => (Vec::new(), false),
        };
        present.sort();
        let gone: Vec<PathBuf> = self
            .entries
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        let mut changed = false;
        for path in gone.iter().chain(&present) {
            changed |= self.reconcile(path, may_load);
        }
        if changed {
            self.publish();
        }
    }

    /// Checks the folder chain; logs once when it turns unsafe (or the reason changes) and
    /// once when it is safe again.
    fn folder_is_trusted(&mut self) -> bool {
        match trust::check_folder(&self.dir) {
            Ok(()) => {
                if self.distrusted.take().is_some() {
                    tracing::info!(dir = %self.dir.display(), "plugins.dir is trusted again; loading from it");
                }
                true
            }
            Err(refusal) => {
                let line = folder_problem(&self.dir, &refusal);
                if self.distrusted.as_ref() != Some(&line) {
                    tracing::warn!("{line}");
                    self.distrusted = Some(line);
                }
                false
            }
        }
    }

    /// Loads, reloads or forgets one path (loads only if `may_load`); true when something
    /// changed. A symlink or FIFO is not skipped silently: the loader refuses it with a reason.
    fn reconcile(&mut self, path: &Path, may_load: bool) -> bool {
        let meta = std::fs::symlink_metadata(path).ok().filter(|m| !m.is_dir());
        let Some(meta) = meta else {
            let Some(old) = self.entries.remove(path) else {
                return false;
            };
            if let Ok(tool) = old.loaded {
                tracing::info!(tool = %tool.name(), path = %path.display(), "plugin removed from the drop-in folder; its tool is unregistered");
            }
            return true;
        };
        let fingerprint = Fingerprint::of(&meta);
        // A refusal for trust is retried while the file is unchanged: it may come from a folder
        // that changed during the scan, which the file's fingerprint does not show.
        let unchanged = self
            .entries
            .get(path)
            .filter(|e| e.fingerprint == fingerprint);
        let retry = match unchanged {
            Some(e) if is_untrusted(&e.loaded) => true,
            Some(_) => return false,
            None => false,
        };
        if !may_load {
            tracing::debug!(path = %path.display(), "not loaded: plugins.dir is not trusted");
            return false;
        }
        let loaded = self.loader.load(path);
        match &loaded {
            Ok(tool) => {
                tracing::info!(tool = %tool.name(), path = %path.display(), hash = %&tool.library.hash[..12], "plugin loaded from the drop-in folder")
            }
            Err(e) => self.report(e.to_string()),
        }
        if retry && is_untrusted(&loaded) {
            return false;
        }
        self.entries.insert(
            path.to_owned(),
            Entry {
                fingerprint,
                loaded,
            },
        );
        true
    }

    /// Builds and swaps in the registry: built-ins first, then drop-ins by file name.
    fn publish(&mut self) {
        let dropins = self
            .entries
            .values()
            .filter_map(|e| e.loaded.as_ref().ok().cloned());
        let (registry, clashes) = Registry::build(self.builtins.iter().cloned().chain(dropins));
        for clash in clashes {
            self.report(clash.to_string());
        }
        self.registry.replace(registry);
    }

    /// Logs a problem once (the same bad file is not reported at every rescan).
    fn report(&mut self, line: String) {
        if self.reported.insert(line.clone()) {
            tracing::warn!("{line}");
        }
    }

    /// Watches the folder on a thread of its own until the guard is dropped.
    pub fn spawn(mut self) -> WatchGuard {
        let (guard, stop) = WatchGuard::new();
        std::thread::Builder::new()
            .name("rojos-plugins-watch".to_owned())
            .spawn(move || self.watch(&stop))
            .expect("the watcher thread starts");
        guard
    }

    fn watch(&mut self, stop: &AtomicBool) {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher = None;
        let mut pending: BTreeMap<PathBuf, Instant> = BTreeMap::new();
        let mut next_rescan = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next_rescan {
                let current = std::fs::metadata(&self.dir)
                    .ok()
                    .filter(|m| m.is_dir())
                    .map(|m| m.ino());
                if watcher.is_none() || current != self.watched {
                    watcher = self.start_watching(&tx);
                    self.watched = watcher.as_ref().and(current);
                }
                self.scan();
                next_rescan = now + RESCAN;
            }
            let ready: Vec<PathBuf> = pending
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(p, _)| p.clone())
                .collect();
            if !ready.is_empty() {
                let may_load = self.dir.is_dir() && self.folder_is_trusted();
                let mut changed = false;
                for path in ready {
                    pending.remove(&path);
                    changed |= is_candidate(&path) && self.reconcile(&path, may_load);
                }
                if changed {
                    self.publish();
                }
            }
            let wake = pending
                .values()
                .copied()
                .chain([next_rescan])
                .min()
                .unwrap_or(next_rescan);
            let timeout = wake
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250));
            match rx.recv_timeout(timeout) {
                Ok(Ok(event)) => {
                    if event.need_rescan() {
                        next_rescan = Instant::now();
                    }
                    if matches!(
                        event.kind,
                        EventKind::Access(AccessKind::Open(_) | AccessKind::Read | AccessKind::Any)
                    ) {
                        continue; // our own reads of the files
                    }
                    // Events name the canonical path; entries are keyed by `dir/name`.
                    for name in event.paths.iter().filter_map(|p| p.file_name()) {
                        pending.insert(self.dir.join(name), Instant::now() + QUIET);
                    }
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "drop-in folder watch error; rescanning");
                    watcher = None;
                    next_rescan = Instant::now();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Watches the folder if it exists; `None` to retry at the next rescan. (Whether it is safe
    /// to load from is checked at every scan and before every load, not here.)
    fn start_watching(
        &mut self,
        tx: &mpsc::Sender<notify::Result<notify::Event>>,
    ) -> Option<notify::RecommendedWatcher> {
        if !self.dir.is_dir() {
            return None;
        }
        let tx = tx.clone();
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })
        .map_err(|e| {
            self.report(format!(
                "plugins.dir '{}': cannot watch it: {e}",
                self.dir.display()
            ))
        })
        .ok()?;
        let canonical = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        watcher
            .watch(&canonical, RecursiveMode::NonRecursive)
            .map_err(|e| {
                self.report(format!(
                    "plugins.dir '{}': cannot watch it: {e}",
                    self.dir.display()
                ))
            })
            .ok()?;
        Some(watcher)
    }
}

/// Whether a load was refused for trust (see `trust`), not for what the file holds.
fn is_untrusted(loaded: &Result<Arc<Tool>, LoadError>) -> bool {
    matches!(
        loaded,
        Err(LoadError {
            reason: LoadFailure::Untrusted(_),
            ..
        })
    )
}

/// A plugin file: `*.so`, not a dot-name (dot-names are copies still in progress).
fn is_candidate(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && name.ends_with(".so")
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Collects log lines written while `f` runs on this thread.
    fn logs_of(f: impl FnOnce()) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_bad_file_is_logged_once_in_one_line_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libgarbage.so"), "garbage").unwrap();
        std::fs::write(dir.path().join(".libcopying.so"), "half").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a plugin").unwrap();
        let registry = Arc::new(RegistryHandle::new(Registry::default()));
        let loader = Arc::new(Loader::new(1).unwrap());
        let mut dropin = DropIn::new(
            dir.path().to_owned(),
            loader,
            Vec::new(),
            Arc::clone(&registry),
        );
        let logs = logs_of(|| {
            dropin.scan();
            // A rescan with nothing changed, then a touch that changes the fingerprint only.
            dropin.scan();
            std::fs::write(dir.path().join("libgarbage.so"), "garbage").unwrap();
            dropin.scan();
        });
        let warnings: Vec<&String> = logs.iter().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 1, "{logs:#?}");
        assert!(
            warnings[0].contains("libgarbage.so': not a plugin library: not an ELF file (7 bytes)"),
            "{logs:#?}"
        );
        assert_eq!(registry.snapshot().tools().count(), 0);
    }

    #[test]
    fn a_folder_made_unsafe_loads_nothing_new_says_so_once_and_resumes_when_fixed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let chmod = |mode| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let registry = Arc::new(RegistryHandle::new(Registry::default()));
        let loader = Arc::new(Loader::new(1).unwrap());
        let mut dropin = DropIn::new(dir.path().to_owned(), loader, Vec::new(), registry);
        let logs = logs_of(|| {
            dropin.scan();
            chmod(0o777);
            std::fs::write(dir.path().join("libgarbage.so"), "garbage").unwrap();
            dropin.scan();
            dropin.scan();
            chmod(0o755);
            dropin.scan();
        });
        let warnings: Vec<&String> = logs.iter().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 2, "{logs:#?}");
        assert!(
            warnings[0].contains("is not trusted, no plugin is loaded from it")
                && warnings[0].contains("(mode 777); fix: chmod go-w"),
            "{logs:#?}"
        );
        assert!(
            warnings[1].contains("libgarbage.so': not a plugin library"),
            "read only once the folder is safe again: {logs:#?}"
        );
        assert!(
            logs.iter().any(|l| l.contains("trusted again")),
            "{logs:#?}"
        );
    }

    #[test]
    fn a_group_or_world_writable_folder_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("plugins.d");
        check_folder(&folder).expect("a new folder is created with safe permissions");
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = check_folder(&folder).unwrap_err();
        assert!(
            e.contains("is writable by group or others (mode 775)"),
            "{e}"
        );
        let real = folder.canonicalize().unwrap();
        assert!(
            e.ends_with(&format!("fix: chmod go-w '{}'", real.display())),
            "{e}"
        );
    }

    #[test]
    fn only_so_files_without_a_leading_dot_are_plugins() {
        assert!(is_candidate(Path::new("plugins.d/libx.so")));
        assert!(!is_candidate(Path::new("plugins.d/.libx.so")));
        assert!(!is_candidate(Path::new("plugins.d/libx.so.tmp")));
        assert!(!is_candidate(Path::new("plugins.d/readme.md")));
    }
}
