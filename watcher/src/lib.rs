//! One folder watcher, shared by the drop-in folder (`plugins::DropIn`) and the config file
//! (`live`): it watches a folder on a thread of its own, gives each path a quiet period after
//! its last event, then hands the settled paths to a [`Handler`]; it stops when its
//! [`WatchGuard`] is dropped.
//!
//! No single file-system event means "write complete" (a copy, a build or an editor's save
//! shows as several events, with a half-written file between them), hence the quiet period.
//! With a rescan period, the handler also gets a full look at the folder periodically and
//! after a missed event: a folder deleted and recreated silently ends an inotify watch, so at
//! each rescan a folder that is a new one (another inode) is watched again.
//!
//! The watch is in place when [`spawn`] returns, so an edit made right after it is seen.
//!
//! Hand-written on `notify` rather than `notify-debouncer-mini`: that crate reports a path
//! still being written every quiet period (`AnyContinuous`), drops the event kind (so our own
//! opens of a file, which inotify reports, would count as edits), and neither rescans nor
//! re-watches a recreated folder, so this loop would be needed around it anyway.

#![forbid(unsafe_code)]

use std::{
    collections::BTreeMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc, Arc,
    },
    time::{Duration, Instant},
};

use notify::{
    event::{AccessKind, AccessMode},
    EventKind, RecursiveMode, Watcher,
};

/// Why a folder cannot be watched.
pub use notify::Error;

/// The longest the thread sleeps before it looks at its stop flag again.
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// What a watched folder's changes are for.
pub trait Handler: Send + 'static {
    /// Paths (`folder/name`, in path order) that have been quiet for the quiet period.
    fn settled(&mut self, paths: Vec<PathBuf>);

    /// A full look at the folder: at start, every rescan period and after a missed event.
    /// Called only with a rescan period.
    fn rescan(&mut self) {}

    /// The folder exists but cannot be watched (with a rescan period, retried at each rescan).
    fn cannot_watch(&mut self, folder: &Path, error: &Error);
}

/// How a folder is watched.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a path must stay quiet after its last event before it is settled.
    pub quiet: Duration,
    /// How often [`Handler::rescan`] runs whatever the events said; `None` for never.
    pub rescan: Option<Duration>,
    /// The watcher thread's name.
    pub thread: &'static str,
    /// Only this name matters (the config file): events about other names in the folder are
    /// dropped on notify's own thread, so a log file written beside the config never wakes
    /// the watcher thread (it did on every line: 9 % of a benchmarked host's CPU).
    pub only: Option<std::ffi::OsString>,
}

/// Stops the watcher thread when dropped.
#[derive(Debug)]
pub struct WatchGuard {
    stop: Arc<AtomicBool>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Watches `folder` for `handler` until the returned guard is dropped. The watch is in place
/// when this returns; if it cannot be and there is no rescan period, no thread is started.
///
/// # Panics
///
/// The thread cannot be started (the process is out of resources).
pub fn spawn(folder: PathBuf, options: Options, mut handler: impl Handler) -> WatchGuard {
    let stop = Arc::new(AtomicBool::new(false));
    let guard = WatchGuard {
        stop: Arc::clone(&stop),
    };
    let (sender, events) = mpsc::channel();
    let without_rescan = options.rescan.is_none();
    let thread = options.thread;
    let mut watch = FolderWatch {
        folder,
        options,
        sender,
        events,
        watcher: None,
        watched: None,
        pending: BTreeMap::new(),
    };
    watch.rewatch_if_needed(&mut handler);
    if watch.watcher.is_none() && without_rescan {
        return guard;
    }
    std::thread::Builder::new()
        .name(thread.to_owned())
        .spawn(move || watch.run(&mut handler, &stop))
        .expect("the watcher thread starts");
    guard
}

type Events = mpsc::Receiver<notify::Result<notify::Event>>;

/// The state of one watcher thread.
struct FolderWatch {
    folder: PathBuf,
    options: Options,
    sender: mpsc::Sender<notify::Result<notify::Event>>,
    events: Events,
    watcher: Option<notify::RecommendedWatcher>,
    /// The inode of the folder being watched: a folder deleted and recreated is a new one.
    watched: Option<u64>,
    /// When each path with recent events will be settled.
    pending: BTreeMap<PathBuf, Instant>,
}

impl FolderWatch {
    fn run(mut self, handler: &mut impl Handler, stop: &AtomicBool) {
        let mut next_rescan = self.options.rescan.map(|_| Instant::now());
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if next_rescan.is_some_and(|at| now >= at) {
                self.rewatch_if_needed(handler);
                handler.rescan();
                next_rescan = self.options.rescan.map(|period| now + period);
            }
            let settled = self.take_settled(now);
            if !settled.is_empty() {
                handler.settled(settled);
            }
            let wake = self.pending.values().chain(&next_rescan).min().copied();
            let sleep = wake.map_or(MAX_SLEEP, |at| {
                at.saturating_duration_since(Instant::now()).min(MAX_SLEEP)
            });
            match self.events.recv_timeout(sleep) {
                Ok(Ok(event)) => {
                    if event.need_rescan() {
                        next_rescan = self.options.rescan.map(|_| Instant::now());
                    }
                    self.note(&event);
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, folder = %self.folder.display(), "folder watch error");
                    if self.options.rescan.is_some() {
                        self.watcher = None;
                        next_rescan = Some(Instant::now());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Restarts every path the event names on its quiet period.
    fn note(&mut self, event: &notify::Event) {
        if is_a_read(&event.kind) {
            return; // inotify reports opens, our own reads of the files included
        }
        let settles = Instant::now() + self.options.quiet;
        // Events name the canonical path; handlers get `folder/name` as configured.
        for name in event.paths.iter().filter_map(|p| p.file_name()) {
            self.pending.insert(self.folder.join(name), settles);
        }
    }

    /// Removes and returns the paths quiet since their settle time.
    fn take_settled(&mut self, now: Instant) -> Vec<PathBuf> {
        let settled: Vec<PathBuf> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(path, _)| path.clone())
            .collect();
        for path in &settled {
            self.pending.remove(path);
        }
        settled
    }

    /// Watches the folder again if it is not watched or was recreated.
    fn rewatch_if_needed(&mut self, handler: &mut impl Handler) {
        let current = std::fs::metadata(&self.folder)
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .map(|m| m.ino());
        if self.watcher.is_none() || current != self.watched {
            self.watcher = self.start_watching(handler);
            self.watched = self.watcher.as_ref().and(current);
        }
    }

    /// A watch on the folder if it exists; `None` to retry at the next rescan.
    fn start_watching(&self, handler: &mut impl Handler) -> Option<notify::RecommendedWatcher> {
        if !self.folder.is_dir() {
            return None;
        }
        let sender = self.sender.clone();
        let only = self.options.only.clone();
        let canonical = self
            .folder
            .canonicalize()
            .unwrap_or_else(|_| self.folder.clone());
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let (Some(name), Ok(event)) = (&only, &event) {
                let named = event.paths.iter().any(|p| p.file_name() == Some(name));
                if !named && !event.need_rescan() {
                    return;
                }
            }
            let _ = sender.send(event);
        })
        .and_then(|mut w| w.watch(&canonical, RecursiveMode::NonRecursive).map(|()| w))
        .map_err(|e| handler.cannot_watch(&self.folder, &e))
        .ok()
    }
}

/// Whether an event only says a file was opened or read (a finished write, `Close(Write)`,
/// counts as a change).
fn is_a_read(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write)
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records what the watcher hands over.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<PathBuf>>>);

    impl Handler for Recorder {
        fn settled(&mut self, paths: Vec<PathBuf>) {
            self.0.lock().unwrap().extend(paths);
        }
        fn cannot_watch(&mut self, _: &Path, error: &notify::Error) {
            panic!("cannot watch: {error}");
        }
    }

    fn wait_for(what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_burst_of_writes_right_after_start_settles_once_per_path() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::default();
        let options = Options {
            quiet: Duration::from_millis(300),
            rescan: None,
            thread: "test-watch",
            only: None,
        };
        let _guard = spawn(dir.path().to_owned(), options, recorder.clone());
        for round in 0..5 {
            std::fs::write(dir.path().join("a.toml"), format!("round {round}")).unwrap();
        }
        std::fs::write(dir.path().join("b.toml"), "b").unwrap();
        assert!(wait_for(|| recorder.0.lock().unwrap().len() >= 2));
        std::thread::sleep(Duration::from_millis(600));
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [dir.path().join("a.toml"), dir.path().join("b.toml")],
            "one settled path each, named as the folder was given"
        );
    }

    #[test]
    fn with_only_a_name_other_files_of_the_folder_are_never_handed_over() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Recorder::default();
        let options = Options {
            quiet: Duration::from_millis(100),
            rescan: None,
            thread: "test-watch-only",
            only: Some("rojos.toml".into()),
        };
        let _guard = spawn(dir.path().to_owned(), options, recorder.clone());
        for line in 0..50 {
            std::fs::write(dir.path().join("host.log"), format!("line {line}")).unwrap();
        }
        std::fs::write(dir.path().join("rojos.toml"), "edited").unwrap();
        assert!(wait_for(|| !recorder.0.lock().unwrap().is_empty()));
        std::thread::sleep(Duration::from_millis(400));
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(seen, [dir.path().join("rojos.toml")]);
    }

    #[test]
    fn opens_and_reads_are_not_changes() {
        assert!(is_a_read(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!is_a_read(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(!is_a_read(&EventKind::Modify(
            notify::event::ModifyKind::Any
        )));
    }
}
