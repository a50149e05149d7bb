//! Undo of a run's file changes (docs/api.md "Undo of file changes"). Around each call of a
//! tool that declares `changes_paths` or `creates_paths` inside a chat run, on the call's own
//! thread ([`RunCheckpoint::around`]): before it, the earlier state of exactly the paths its
//! arguments name (through fs-guard's [`ProjectDir::snapshot`], which resolves them as the
//! tool will; only what is missing for a path the tool only creates); after it, their
//! fingerprints. [`Checkpoints::undo`] puts the earlier state back (through
//! [`ProjectDir::restore`]) when every path is still as the run
//! left it. Checkpoints live in `<storage>/<projectId>/checkpoints/`, beside `root/`, where
//! no tool reaches, one log per run, within `[limits] checkpoint_bytes` per project (oldest
//! dropped first).
//!
//! # Layout
//!
//! - `stored`: a run's append-only log on disk.
//! - `fingerprint`: what "unchanged since the run" compares.
//! - `before`: a file's text before a run, for the panel's line diff.

mod before;
mod fingerprint;
mod stored;

use std::{
    collections::HashMap,
    io,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rojos_conversations::ConversationId;
use rojos_fs_guard::{Node, PathError, ProjectDir};
use rojos_plugin_api::Limits;
use serde::Serialize;
use serde_json::{Map, Value};

pub use before::{Before, BeforeError};

use crate::{
    plugins::AroundCall,
    storage::{Handle, ProjectId, Storage},
};
use fingerprint::fingerprint;
use stored::{open_or_create, Log, Manifest};

/// The folder beside `root/` that holds a project's checkpoints.
const CHECKPOINTS: &str = "checkpoints";

/// Every project's checkpoints, within the per-project byte budget.
#[derive(Debug)]
pub struct Checkpoints {
    storage: Arc<Storage>,
    /// `[limits] checkpoint_bytes`: most blob bytes one project's checkpoints keep.
    budget: u64,
    /// Each project's [`ProjectLock`] in this host.
    projects: Mutex<HashMap<ProjectId, Arc<ProjectLock>>>,
}

/// One change of a project's checkpoint files at a time in this host (one project's
/// recording waits for no other project's: a record holds this lock through its sync).
type ProjectLock = Mutex<ProjectState>;

/// What this host knows of a project's checkpoints.
#[derive(Debug, Default)]
struct ProjectState {
    /// The bytes they keep: `None` until one scan of them, then kept up to date as they are
    /// added, so recording does not read every log of the project (it did, per recorded path:
    /// quadratic over a project's life). Scanned again only when a record would pass the
    /// budget.
    kept: Option<u64>,
    /// Whether the `checkpoints` folder's own name was synced into the project folder (a new
    /// log's name then needs only the `checkpoints` folder synced).
    folder_synced: bool,
}

/// A checkpoint as `GET /conversations/{id}/checkpoints` lists it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The run's id.
    pub run: String,
    /// The index of the run's user message in the conversation.
    pub message: u64,
    /// When its first change was recorded, in Unix milliseconds.
    pub created_at: u64,
    /// The paths its calls changed, as the model named them.
    pub paths: Vec<String>,
    /// Whether its changes were undone.
    pub undone: bool,
    /// Whether it can still be undone (false once the budget dropped it).
    pub available: bool,
}

/// Why an undo did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// No run of the conversation has file changes left to undo.
    #[error("no run of this conversation has file changes left to undo")]
    Nothing,
    /// The last run's checkpoint was dropped to keep within the budget.
    #[error("the file changes of run {0} can no longer be undone: its checkpoint was dropped to keep within limits.checkpoint_bytes")]
    Evicted(String),
    /// A recorded earlier state no longer matches its fingerprint (the log was damaged).
    #[error("the checkpoint of '{0}' is damaged (its recorded bytes no longer match their fingerprint): this run can no longer be undone; nothing was changed")]
    Damaged(String),
    /// Paths changed since the run; the undo would lose those changes.
    #[error("{} changed since this run; undoing it would lose those changes. Undo anyway with {{\"force\": true}}", list(.0))]
    Changed(Vec<String>),
    /// A path could not be put back (fs-guard's refusal, e.g. a folder now a link out).
    #[error("the undo stopped: {0}")]
    Restore(#[from] PathError),
    /// The checkpoint files could not be read or written.
    #[error("the checkpoint cannot be read or written")]
    Io(#[from] io::Error),
}

fn list(paths: &[String]) -> String {
    let quoted: Vec<String> = paths.iter().map(|p| format!("'{p}'")).collect();
    quoted.join(", ")
}

impl Checkpoints {
    /// The checkpoints of projects in `storage`, `budget` bytes per project.
    pub fn new(storage: Arc<Storage>, budget: u64) -> Checkpoints {
        Checkpoints {
            storage,
            budget,
            projects: Mutex::new(HashMap::new()),
        }
    }

    /// The checkpoint of a new run answering the message at index `message`; `None` when
    /// undo is off (`[limits] checkpoint_bytes = 0`).
    pub fn run(
        self: &Arc<Self>,
        project: ProjectId,
        conversation: ConversationId,
        message: u64,
    ) -> Option<RunCheckpoint> {
        (self.budget > 0).then(|| RunCheckpoint {
            store: Arc::clone(self),
            project,
            conversation,
            message,
            log: Arc::new(Mutex::new(None)),
        })
    }

    /// The conversation's runs with file changes, oldest first.
    ///
    /// # Errors
    ///
    /// The checkpoint files cannot be read.
    pub async fn list(
        self: &Arc<Self>,
        project: &ProjectId,
        conversation: &ConversationId,
    ) -> io::Result<Vec<Summary>> {
        let (store, project, conversation) =
            (Arc::clone(self), project.clone(), conversation.clone());
        blocking(move || {
            let runs = store.conversation_runs(&project, &conversation)?;
            Ok(runs.map_or_else(Vec::new, |(_, runs)| runs.iter().map(summary).collect()))
        })
        .await
    }

    /// Undoes the file changes of the conversation's last run not yet undone (`force`: even
    /// over changes made since). The caller holds the conversation's run lease.
    ///
    /// # Errors
    ///
    /// See [`UndoError`].
    pub async fn undo(
        self: &Arc<Self>,
        project: &ProjectId,
        conversation: &ConversationId,
        force: bool,
    ) -> Result<Summary, UndoError> {
        let (store, project, conversation) =
            (Arc::clone(self), project.clone(), conversation.clone());
        blocking(move || store.undo_now(&project, &conversation, force)).await
    }

    /// Removes the conversation's checkpoints (the conversation was deleted).
    ///
    /// # Errors
    ///
    /// The checkpoint folder cannot be removed.
    pub async fn forget(
        self: &Arc<Self>,
        project: &ProjectId,
        conversation: &ConversationId,
    ) -> io::Result<()> {
        let (store, project, conversation) =
            (Arc::clone(self), project.clone(), conversation.clone());
        blocking(move || {
            let lock = store.project_lock(&project);
            let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
            state.kept = None;
            let Some(checkpoints) = store.project_dir(&project, false)? else {
                return Ok(());
            };
            let mut removed = false;
            for entry in checkpoints.entries()? {
                let name = entry?.file_name();
                let ours = name
                    .to_str()
                    .and_then(|n| n.strip_prefix(conversation.as_str()));
                if ours.is_some_and(|rest| rest.starts_with('.')) {
                    match checkpoints.remove_file(&name) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => removed = true,
                    }
                }
            }
            if removed {
                stored::sync_dir(&checkpoints)?;
            }
            Ok(())
        })
        .await
    }

    /// The text `path` held before the conversation's run `run` (at most `limit` bytes).
    ///
    /// # Errors
    ///
    /// See [`BeforeError`].
    pub async fn before(
        self: &Arc<Self>,
        project: &ProjectId,
        conversation: &ConversationId,
        run: &str,
        path: &str,
        limit: u64,
    ) -> Result<Before, BeforeError> {
        before::parts(path)?;
        let (store, project, conversation) =
            (Arc::clone(self), project.clone(), conversation.clone());
        let (run, path) = (run.to_owned(), path.to_owned());
        blocking(move || {
            let (checkpoints, runs) = store
                .conversation_runs(&project, &conversation)?
                .ok_or_else(|| BeforeError::NoRun(run.clone()))?;
            let manifest = runs
                .into_iter()
                .find(|m| m.run == run)
                .ok_or_else(|| BeforeError::NoRun(run.clone()))?;
            if manifest.evicted {
                return Err(BeforeError::Evicted(run));
            }
            let log = Log::open(&checkpoints, conversation.as_str(), &manifest.run)?;
            before::find(&log, &path, limit)
        })
        .await
    }

    /// The lock of `project`'s checkpoints in this host.
    fn project_lock(&self, project: &ProjectId) -> Arc<ProjectLock> {
        let mut projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(projects.entry(project.clone()).or_default())
    }

    fn undo_now(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        force: bool,
    ) -> Result<Summary, UndoError> {
        let lock = self.project_lock(project);
        let _one_at_a_time = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (checkpoints, runs) = self
            .conversation_runs(project, conversation)?
            .ok_or(UndoError::Nothing)?;
        let manifest = runs
            .into_iter()
            .rev()
            .find(|m| !m.undone)
            .ok_or(UndoError::Nothing)?;
        if manifest.evicted {
            return Err(UndoError::Evicted(manifest.run));
        }
        let mut log = Log::open(&checkpoints, conversation.as_str(), &manifest.run)?;
        let root = self
            .storage
            .existing_project_root(project)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let dir = ProjectDir::new(root, Limits::default());
        if !force {
            let changed: Vec<String> = log
                .manifest
                .entries
                .iter()
                .filter(|e| e.after.is_none() || e.after != self.current(&dir, &e.path))
                .map(|e| e.path.clone())
                .collect();
            if !changed.is_empty() {
                return Err(UndoError::Changed(changed));
            }
        }
        // Every earlier state is read and checked against its fingerprint before anything is
        // put back: a damaged log stops the undo with nothing changed.
        let mut earlier = Vec::with_capacity(log.manifest.entries.len());
        for entry in &log.manifest.entries {
            let node = log.load(&entry.before)?;
            if fingerprint(&node) != entry.before_print {
                tracing::error!(run = %log.manifest.run, path = %entry.path, "damaged checkpoint");
                return Err(UndoError::Damaged(entry.path.clone()));
            }
            earlier.push((entry.path.as_str(), node));
        }
        for (path, node) in earlier.iter().rev() {
            dir.restore(path, node)?;
        }
        drop(earlier);
        log.record_undone()?;
        tracing::info!(run = %log.manifest.run, %conversation, "file changes undone");
        Ok(summary(&log.manifest))
    }

    /// The fingerprint of what stands at `path` now (`None` when it cannot be read).
    fn current(&self, dir: &ProjectDir, path: &str) -> Option<String> {
        let recorded = dir.snapshot(path, self.budget).ok()?;
        recorded.last().map(|r| fingerprint(&r.node))
    }

    /// `<storage>/<projectId>/checkpoints/`, created when `create`; `None` when missing.
    fn project_dir(&self, project: &ProjectId, create: bool) -> io::Result<Option<Dir>> {
        if let Some(folder) = self
            .storage
            .open_existing(project, CHECKPOINTS, Handle::Readable)
        {
            return Ok(Some(folder));
        }
        let storage = self.storage.dir();
        let project_dir = if create {
            open_or_create(storage, project.as_str())?
        } else {
            match storage.open_dir_nofollow(project.as_str()) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                other => other?,
            }
        };
        if create {
            return open_or_create(&project_dir, CHECKPOINTS).map(Some);
        }
        match project_dir.open_dir_nofollow(CHECKPOINTS) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            other => other.map(Some),
        }
    }

    /// The project's checkpoints folder and the conversation's checkpoints with changes,
    /// oldest first; `None` when the project has no such folder.
    fn conversation_runs(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
    ) -> io::Result<Option<(Dir, Vec<Manifest>)>> {
        let Some(checkpoints) = self.project_dir(project, false)? else {
            return Ok(None);
        };
        let mut runs = runs_in(&checkpoints, Some(conversation.as_str()))?;
        runs.retain(changed_anything);
        Ok(Some((checkpoints, runs)))
    }

    /// Drops the oldest checkpoints of `project` (never the run `keep`) until `needed` more
    /// bytes fit the budget beside the others; returns what the others keep then.
    fn make_room(&self, checkpoints: &Dir, keep: &str, needed: u64) -> io::Result<u64> {
        let mut all = runs_in(checkpoints, None)?;
        all.retain(|m| m.run != keep && !m.evicted);
        all.sort_by_key(|m| m.created_at);
        let mut total: u64 = all.iter().map(|m| m.bytes).sum();
        for manifest in &mut all {
            if total.saturating_add(needed) <= self.budget {
                break;
            }
            total -= manifest.bytes;
            tracing::info!(run = %manifest.run, bytes = manifest.bytes, "checkpoint dropped (limits.checkpoint_bytes)");
            stored::evict(checkpoints, manifest)?;
        }
        Ok(total)
    }
}

/// The bytes a project's checkpoints keep (those not dropped), read from their logs.
fn kept_bytes(checkpoints: &Dir) -> io::Result<u64> {
    Ok(runs_in(checkpoints, None)?
        .iter()
        .filter(|m| !m.evicted)
        .map(|m| m.bytes)
        .sum())
}

/// The checkpoints in a project's `checkpoints` folder (of one `conversation`, or all),
/// oldest first (unreadable ones are skipped and logged; other files are left alone).
fn runs_in(checkpoints: &Dir, conversation: Option<&str>) -> io::Result<Vec<Manifest>> {
    let mut runs = Vec::new();
    for run in checkpoints.entries()? {
        let run = run?;
        let Some(name) = run.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if conversation.is_some_and(|c| !stored::is_log_of(&name, c)) {
            continue;
        }
        match Manifest::read(checkpoints, &name) {
            Ok(Some(manifest)) => runs.push(manifest),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(error = %e, checkpoint = %name, "unreadable checkpoint skipped")
            }
        }
    }
    runs.sort_by(|a, b| (a.created_at, &a.run).cmp(&(b.created_at, &b.run)));
    Ok(runs)
}

/// Whether any recorded path differs after the run from before it.
fn changed_anything(manifest: &Manifest) -> bool {
    manifest
        .entries
        .iter()
        .any(|e| e.after.as_deref() != Some(e.before_print.as_str()))
}

fn summary(manifest: &Manifest) -> Summary {
    Summary {
        run: manifest.run.clone(),
        message: manifest.message,
        created_at: manifest.created_at,
        paths: manifest.paths.clone(),
        undone: manifest.undone,
        available: !manifest.evicted,
    }
}

/// Runs blocking file work off the runtime, as the tools' calls do.
async fn blocking<T: Send + 'static, E: From<io::Error> + Send + 'static>(
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| E::from(io::Error::other(e)))?
}

/// The checkpoint of one chat run, kept in its ledger.
#[derive(Debug)]
pub struct RunCheckpoint {
    store: Arc<Checkpoints>,
    project: ProjectId,
    conversation: ConversationId,
    message: u64,
    /// `None` until the run's first changing call. Shared with the calls' threads, and not
    /// held while a plugin runs: a call abandoned at its deadline records its "after" when
    /// its plugin returns, and the run's next calls record meanwhile.
    log: Arc<Mutex<Option<Log>>>,
}

/// A path a call changes, as its tool declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// It may replace or remove what is there (`changes_paths`): all of it is recorded.
    Whole(String),
    /// It only creates what is missing there (`creates_paths`): only that is recorded.
    Creation(String),
}

impl Change {
    fn path(&self) -> &str {
        match self {
            Change::Whole(path) | Change::Creation(path) => path,
        }
    }
}

/// The paths a call changes: the string values of the tool's `changes_paths` and
/// `creates_paths` arguments (a missing or non-string one names nothing; the schema check
/// refuses such calls).
pub fn changed_paths(
    changes: &[String],
    creates: &[String],
    arguments: &Map<String, Value>,
) -> Vec<Change> {
    let named = |names: &[String], change: fn(String) -> Change| {
        names
            .iter()
            .filter_map(|name| arguments.get(name)?.as_str().map(|p| change(p.to_owned())))
            .collect::<Vec<_>>()
    };
    let mut all = named(changes, Change::Whole);
    all.extend(named(creates, Change::Creation));
    all
}

impl RunCheckpoint {
    /// The recording around one call that changes `paths`: before it, the earlier state of
    /// those not recorded by an earlier call of this run, complete on disk (its `Err` is the
    /// refusal the model reads: the call must not run, since it could not be undone); after
    /// it, the fingerprints of the run's recorded paths as they are then.
    pub fn around(&self, paths: Vec<Change>, root: &Arc<Dir>) -> Box<dyn AroundCall> {
        Box::new(Recording {
            store: Arc::clone(&self.store),
            project: self.project.clone(),
            conversation: self.conversation.clone(),
            message: self.message,
            log: Arc::clone(&self.log),
            paths,
            root: Arc::clone(root),
            dir: None,
            touched: None,
        })
    }
}

/// [`RunCheckpoint::around`]: what one call's thread records.
struct Recording {
    store: Arc<Checkpoints>,
    project: ProjectId,
    conversation: ConversationId,
    message: u64,
    log: Arc<Mutex<Option<Log>>>,
    paths: Vec<Change>,
    root: Arc<Dir>,
    /// The project's files as the recording reads them, from before the call to after it.
    dir: Option<ProjectDir>,
    /// The paths the call may change, as fs-guard resolved them before it ran; `None`: every
    /// recorded path is fingerprinted again after it (one of them goes through a link).
    touched: Option<Vec<String>>,
}

impl AroundCall for Recording {
    fn before(&mut self) -> Result<(), String> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let dir = ProjectDir::new(
            self.root.try_clone().map_err(Checkpoints::unrecorded)?,
            Limits::default(),
        );
        self.touched = self.store.record(
            &self.project,
            &self.conversation,
            self.message,
            &mut log,
            &self.paths,
            &dir,
        )?;
        self.dir = Some(dir);
        Ok(())
    }

    fn after(&mut self) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(log), Some(dir)) = (log.as_mut(), self.dir.as_ref()) else {
            return;
        };
        let touched = self.touched.as_deref();
        if let Err(e) = self
            .store
            .fingerprint_after(&self.project, log, dir, touched)
        {
            tracing::error!(error = %e, "checkpoint fingerprints not stored");
        }
    }
}

impl Checkpoints {
    /// What [`RunCheckpoint::around`] records before a call: the run's log is created by
    /// its first call that records anything. Returns the paths the call may change, as
    /// fs-guard resolved them (`None` when one of them goes through a symbolic link: what
    /// it changes is then not known by name).
    fn record(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        message: u64,
        log: &mut Option<Log>,
        paths: &[Change],
        dir: &ProjectDir,
    ) -> Result<Option<Vec<String>>, String> {
        let lock = self.project_lock(project);
        let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
        let failed = Self::unrecorded;
        // The folder the run's log keeps open, or the one its first record creates it in.
        let mut opened = None;
        let checkpoints = match log.as_ref().and_then(|log| log.folder.as_ref()) {
            Some(folder) => folder,
            None => opened.insert(
                self.project_dir(project, true)
                    .map_err(failed)?
                    .ok_or_else(|| failed(io::ErrorKind::NotFound.into()))?,
            ),
        };
        // The run's log so far, or the manifest of the log its first record creates.
        let mut fresh = None;
        let manifest = match log.as_ref() {
            Some(log) => &log.manifest,
            None => {
                let now = now_ms();
                let run = format!("{now:013}-{message}");
                fresh.insert(Manifest::new(conversation.as_str(), run, message, now))
            }
        };
        let mut new_paths = Vec::new();
        let mut touched = Vec::new();
        let mut recorded: Vec<(String, Node, String)> = Vec::new();
        let mut bytes = manifest.bytes;
        for change in paths {
            let snapshot = match change {
                Change::Whole(path) => dir.snapshot(path, self.budget.saturating_sub(bytes)),
                Change::Creation(path) => dir.snapshot_creation(path),
            };
            for r in snapshot.map_err(|e| self.refusal(e))? {
                touched.push(r.path.clone());
                let earlier = manifest.entries.iter().map(|e| e.path.as_str());
                if covered(
                    earlier.chain(recorded.iter().map(|(p, _, _)| p.as_str())),
                    &r.path,
                ) {
                    continue;
                }
                let size = r.node.content_bytes();
                let used = match state.kept {
                    Some(used) => used,
                    None => kept_bytes(checkpoints).map_err(failed)?,
                };
                let used = if used.saturating_add(size) <= self.budget {
                    used + size
                } else {
                    let others = self
                        .make_room(checkpoints, &manifest.run, bytes + size)
                        .map_err(failed)?;
                    others + bytes + size
                };
                state.kept = Some(used);
                bytes += size;
                let print = fingerprint(&r.node);
                recorded.push((r.path, r.node, print));
            }
            let path = change.path();
            if !manifest.paths.iter().chain(&new_paths).any(|p| p == path) {
                new_paths.push(path.to_owned());
            }
        }
        let touched = (!through_link(dir.root(), &touched)).then_some(touched);
        if recorded.is_empty() && new_paths.is_empty() {
            return Ok(touched); // every path was recorded by an earlier call of the run
        }
        let log = match log {
            Some(log) => log,
            None => {
                let missing = || failed(io::ErrorKind::NotFound.into());
                let manifest = fresh.ok_or_else(missing)?;
                let folder = opened.ok_or_else(missing)?;
                log.insert(Log::create(folder, manifest).map_err(failed)?)
            }
        };
        let synced = log.record_call(new_paths, recorded).map_err(failed)?;
        if synced && !log.names_synced {
            // The names on the way to the run's log must survive a crash with its content.
            if !state.folder_synced {
                let project_dir = self.storage.dir().open_dir_nofollow(project.as_str());
                stored::sync_dir(&project_dir.map_err(failed)?).map_err(failed)?;
                state.folder_synced = true;
            }
            let folder = log.folder.as_ref();
            stored::sync_dir(folder.ok_or_else(|| failed(io::ErrorKind::NotFound.into()))?)
                .map_err(failed)?;
            log.names_synced = true;
        }
        Ok(touched)
    }

    /// The refusal for a call whose earlier state could not be written (logged).
    fn unrecorded(e: io::Error) -> String {
        tracing::error!(error = %e, "checkpoint not written");
        "not run: the change could not be recorded for undo (the server's checkpoint \
         storage failed); try again later"
            .to_owned()
    }

    /// The refusal for a path whose earlier state cannot be recorded.
    fn refusal(&self, error: PathError) -> String {
        match error {
            PathError::SnapshotTooLarge { .. } => format!(
                "not run: this change could not be made undoable: {error}. Undo keeps at most \
                 {} bytes per project ([limits] checkpoint_bytes in rojos.toml: raise it), or \
                 change a smaller part at a time",
                self.budget
            ),
            PathError::NotUndoable { .. } => {
                format!("not run: this change could not be made undoable: {error}")
            }
            other => format!("not run: {other}"),
        }
    }

    /// What [`RunCheckpoint::around`] records after a call.
    /// The recorded paths related to one of `touched` (the same, inside it, or holding it)
    /// are fingerprinted again; the others keep their fingerprints, so a change made to them
    /// by anyone else meanwhile still counts as a change since the run. `None`: all of them.
    fn fingerprint_after(
        &self,
        project: &ProjectId,
        log: &mut Log,
        dir: &ProjectDir,
        touched: Option<&[String]>,
    ) -> io::Result<()> {
        let lock = self.project_lock(project);
        let _one_at_a_time = lock.lock().unwrap_or_else(|p| p.into_inner());
        let prints = log
            .manifest
            .entries
            .iter()
            .map(|entry| {
                let again =
                    touched.is_none_or(|touched| touched.iter().any(|t| related(t, &entry.path)));
                if again {
                    self.current(dir, &entry.path)
                } else {
                    entry.after.clone()
                }
            })
            .collect();
        log.record_after(prints)
    }
}

/// Whether one of two paths is the other or inside it.
fn related(a: &str, b: &str) -> bool {
    covered(std::iter::once(a), b) || covered(std::iter::once(b), a)
}

/// Whether any of `paths` (relative to `root`, as fs-guard resolved them) goes through a
/// symbolic link, or cannot be told: a call through a link changes what the link leads to,
/// which no recorded path names. One resolution per path, beneath the root, that refuses any
/// link on the way (`ELOOP`) and opens the last name without following it; a missing name
/// ends the path (nothing beyond it can be reached), any other failure counts as a link.
fn through_link(root: &Dir, paths: &[String]) -> bool {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    paths.iter().any(|path| {
        match rustix::fs::openat2(root, path.as_str(), flags, Mode::empty(), how) {
            Ok(last) => rustix::fs::fstat(&last).map_or(true, |stat| {
                FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
            }),
            Err(rustix::io::Errno::NOENT) => false,
            Err(_) => true,
        }
    })
}

/// Whether `path` is recorded already (among the `recorded` paths), itself or inside a
/// recorded folder.
fn covered<'a>(mut recorded: impl Iterator<Item = &'a str>, path: &str) -> bool {
    recorded.any(|recorded| {
        path == recorded
            || path
                .strip_prefix(recorded)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_inside_a_recorded_folder_is_covered_but_a_sibling_prefix_is_not() {
        let recorded = || ["docs"].into_iter();
        assert!(covered(recorded(), "docs"));
        assert!(covered(recorded(), "docs/a.txt"));
        assert!(!covered(recorded(), "docs2/a.txt"));
        assert!(!covered(recorded(), "doc"));
    }

    /// A run of `store` in a fresh project of its storage, the project's root, and the ids.
    fn a_run() -> (
        tempfile::TempDir,
        Arc<Checkpoints>,
        RunCheckpoint,
        Arc<Dir>,
        ProjectId,
        ConversationId,
    ) {
        let temp = tempfile::tempdir().expect("temp");
        let storage = Arc::new(Storage::open(&temp.path().join("storage")).expect("storage"));
        let store = Arc::new(Checkpoints::new(Arc::clone(&storage), 1 << 20));
        let project = ProjectId::parse("demo").expect("id");
        let conversation = ConversationId::generate();
        let root = Arc::new(storage.project_root(&project).expect("root"));
        let run = store
            .run(project.clone(), conversation.clone(), 0)
            .expect("undo on");
        (temp, store, run, root, project, conversation)
    }

    /// One changing call of `run`: records around `change`, which `write` makes.
    fn call(run: &RunCheckpoint, root: &Arc<Dir>, path: &str, write: impl FnOnce(&Dir)) {
        let mut around = run.around(vec![Change::Whole(path.to_owned())], root);
        around.before().expect("recorded");
        write(root);
        around.after();
    }

    #[tokio::test]
    async fn a_change_by_hand_between_two_calls_of_a_run_still_counts_as_a_change_since_it() {
        let (_temp, store, run, root, project, conversation) = a_run();
        call(&run, &root, "a.txt", |r| {
            r.write("a.txt", "from the run").expect("write")
        });
        root.write("a.txt", "by hand, during the run")
            .expect("write");
        call(&run, &root, "b.txt", |r| {
            r.write("b.txt", "from the run").expect("write")
        });
        // The second call did not touch a.txt, so its fingerprint is still the run's own.
        match store.undo(&project, &conversation, false).await {
            Err(UndoError::Changed(paths)) => assert_eq!(paths, ["a.txt"]),
            other => panic!("expected a refusal naming a.txt, got {other:?}"),
        }
        // A later call on a.txt itself takes the file as it stands then.
        call(&run, &root, "a.txt", |r| {
            r.write("a.txt", "again").expect("write")
        });
        store
            .undo(&project, &conversation, false)
            .await
            .expect("undone");
        assert!(root.metadata("a.txt").is_err() && root.metadata("b.txt").is_err());
    }

    #[tokio::test]
    async fn a_call_through_a_link_fingerprints_every_recorded_path_again() {
        let (_temp, store, run, root, project, conversation) = a_run();
        call(&run, &root, "real/x.txt", |r| {
            r.create_dir("real").expect("mkdir");
            r.write("real/x.txt", "x").expect("write");
        });
        root.symlink_contents("real", "link")
            .expect("a link to the folder");
        // Through the link, the call changes `real`, which no path of the call names.
        call(&run, &root, "link/y.txt", |r| {
            r.write("link/y.txt", "y").expect("write")
        });
        store
            .undo(&project, &conversation, false)
            .await
            .expect("undone");
        assert!(
            root.metadata("real").is_err(),
            "the run's folder is gone again"
        );
    }

    #[test]
    fn only_string_values_of_declared_arguments_are_changed_paths() {
        let args: Map<String, Value> =
            serde_json::from_str(r#"{"from": "a.txt", "to": "b/", "recursive": true, "path": 3}"#)
                .expect("json");
        let declared = ["from".to_owned(), "to".to_owned(), "path".to_owned()];
        let whole = |p: &str| Change::Whole(p.to_owned());
        assert_eq!(
            changed_paths(&declared, &[], &args),
            [whole("a.txt"), whole("b/")]
        );
        assert_eq!(
            changed_paths(&declared[..1], &declared[1..2], &args),
            [whole("a.txt"), Change::Creation("b/".to_owned())]
        );
        assert!(changed_paths(&[], &[], &args).is_empty());
    }
}
