//! The drop-in folder (`[plugins].dir`): a plugin library moved in is loaded and offered on
//! the next model turn, a replaced one serves its new version, a removed one is unregistered.
//!
//! The folder is watched by the shared folder watcher (`rojos-watcher`): each path is reconciled with what
//! is on disk once it has been quiet for a moment (a copy or a build shows as several events,
//! with a half-written file between them), and the whole folder is rescanned periodically (a
//! deleted folder silently ends the watch; it is watched again when it reappears). Files are
//! fingerprinted, so a rescan reloads nothing unchanged. Each change hands the loaded
//! drop-ins, in file-name order, to a publish callback (the registry's, see `state`): this
//! module knows nothing of the registry.
//!
//! Before anything is loaded, the folder and every folder above it must pass the `trust` rule,
//! at every scan, not only at start: from a folder that turns unsafe nothing new is loaded (one
//! log line), and tools already loaded from it stay, since their code was checked when it was
//! read and runs from the loader's private copies (docs/configuration.md, "The drop-in folder").
//! Every bad file is logged once.

use std::{
    collections::{BTreeMap, HashSet},
    os::unix::fs::{DirBuilderExt, MetadataExt},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use super::{
    trust::{self, Distrust, PathIoError, Refusal},
    LoadError, LoadFailure, Loader, Tool,
};
use rojos_watcher::{self as watcher, WatchGuard};

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
pub fn check_folder(dir: &Path) -> Result<(), FolderError> {
    // Created without group/other write whatever the umask, so a folder we make is never refused.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| FolderError::Create {
            dir: dir.to_owned(),
            source,
        })?;
    trust::check_folder(dir).map_err(|refusal| FolderError::of(dir, refusal))
}

/// Why the drop-in folder is not used.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The folder is missing and cannot be created.
    #[error("plugins.dir '{}': cannot create it: {source}", dir.display())]
    Create {
        /// The folder.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The folder or one above it cannot be opened or inspected.
    #[error("plugins.dir '{}': cannot check it: {source}", dir.display())]
    Check {
        /// The folder.
        dir: PathBuf,
        /// What failed, naming the path.
        source: PathIoError,
    },
    /// The folder or one above it may be written by another user.
    #[error("plugins.dir '{}' is not trusted, no plugin is loaded from it (a plugin runs code in the server): {distrust}; fix: {}", dir.display(), distrust.fix())]
    Untrusted {
        /// The folder.
        dir: PathBuf,
        /// What is wrong, and where.
        #[source]
        distrust: Distrust,
    },
}

impl FolderError {
    fn of(dir: &Path, refusal: Refusal) -> FolderError {
        let dir = dir.to_owned();
        match refusal {
            Refusal::Io(source) => FolderError::Check { dir, source },
            Refusal::Untrusted(distrust) => FolderError::Untrusted { dir, distrust },
        }
    }
}

/// Where the drop-in folder's loaded tools go after each change, in file-name order.
pub type Publish = Box<dyn FnMut(Vec<Arc<Tool>>) + Send>;

/// The drop-in folder's tools.
pub struct DropIn {
    dir: PathBuf,
    loader: Arc<Loader>,
    publish: Publish,
    entries: BTreeMap<PathBuf, Entry>,
    reported: HashSet<String>,
    /// Why the folder was last found unsafe (logged when it changes), `None` while it is safe.
    distrusted: Option<String>,
}

impl std::fmt::Debug for DropIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropIn")
            .field("dir", &self.dir)
            .field("files", &self.entries.len())
            .finish()
    }
}

impl DropIn {
    /// A drop-in folder whose tools are handed to `publish` after each change.
    pub fn new(dir: PathBuf, loader: Arc<Loader>, publish: Publish) -> DropIn {
        DropIn {
            dir,
            loader,
            publish,
            entries: BTreeMap::new(),
            reported: HashSet::new(),
            distrusted: None,
        }
    }

    /// Reconciles every file of the folder with what is loaded, then publishes the tools.
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
                let line = FolderError::of(&self.dir, refusal).to_string();
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
        // A drop-in is anyone's code: it always runs in sandboxed workers.
        let loaded = self.loader.load_as(path, super::Isolation::Worker);
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

    /// Hands the loaded drop-ins, by file name, to the publish callback.
    fn publish(&mut self) {
        let dropins = self
            .entries
            .values()
            .filter_map(|e| e.loaded.as_ref().ok().cloned())
            .collect();
        (self.publish)(dropins);
    }

    /// Logs a problem once (the same bad file is not reported at every rescan).
    fn report(&mut self, line: String) {
        if self.reported.insert(line.clone()) {
            tracing::warn!("{line}");
        }
    }

    /// Watches the folder on a thread of its own until the guard is dropped.
    pub fn spawn(self) -> WatchGuard {
        let options = watcher::Options {
            quiet: QUIET,
            rescan: Some(RESCAN),
            thread: "rojos-plugins-watch",
            only: None,
        };
        watcher::spawn(self.dir.clone(), options, self)
    }
}

impl watcher::Handler for DropIn {
    fn settled(&mut self, paths: Vec<PathBuf>) {
        let may_load = self.dir.is_dir() && self.folder_is_trusted();
        let mut changed = false;
        for path in paths {
            changed |= is_candidate(&path) && self.reconcile(&path, may_load);
        }
        if changed {
            self.publish();
        }
    }

    fn rescan(&mut self) {
        self.scan();
    }

    fn cannot_watch(&mut self, folder: &Path, error: &watcher::Error) {
        self.report(format!(
            "plugins.dir '{}': cannot watch it: {error}",
            folder.display()
        ));
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
        let published = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&published);
        let loader = Arc::new(Loader::new(1).unwrap());
        let mut dropin = DropIn::new(
            dir.path().to_owned(),
            loader,
            Box::new(move |tools| sink.lock().unwrap().push(tools)),
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
        assert!(
            published.lock().unwrap().iter().all(Vec::is_empty),
            "nothing loaded"
        );
    }

    #[test]
    fn a_folder_made_unsafe_loads_nothing_new_says_so_once_and_resumes_when_fixed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let chmod = |mode| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let loader = Arc::new(Loader::new(1).unwrap());
        let mut dropin = DropIn::new(dir.path().to_owned(), loader, Box::new(|_| {}));
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
        let error = check_folder(&folder).unwrap_err();
        assert!(
            matches!(
                &error,
                FolderError::Untrusted {
                    distrust: Distrust::Writable { .. },
                    ..
                }
            ),
            "{error:?}"
        );
        let e = error.to_string();
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
