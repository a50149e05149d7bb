//! Undo of a run's file changes (docs/api.md "Undo of file changes"). Before a tool that
//! declares `changes_paths` runs inside a chat run, [`RunCheckpoint::before_call`] records
//! the earlier state of exactly the paths its arguments name (through fs-guard's
//! [`ProjectDir::snapshot`], which resolves them as the tool will); after it,
//! [`RunCheckpoint::after_call`] records their fingerprints. [`Checkpoints::undo`] puts the
//! earlier state back (through [`ProjectDir::restore`]) when every path is still as the run
//! left it. Checkpoints live in `<storage>/<projectId>/checkpoints/`, beside `root/`, where
//! no tool reaches, within `[limits] checkpoint_bytes` per project (oldest dropped first).
//!
//! # Layout
//!
//! - `stored`: the on-disk manifest and blobs, written atomically.
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
use rojos_fs_guard::{PathError, ProjectDir};
use rojos_plugin_api::Limits;
use serde::Serialize;
use serde_json::{Map, Value};

pub use before::{Before, BeforeError};

use crate::storage::{ProjectId, Storage};
use fingerprint::fingerprint;
use stored::{open_or_create, Entry, Manifest};

/// The folder beside `root/` that holds a project's checkpoints.
const CHECKPOINTS: &str = "checkpoints";

/// Every project's checkpoints, within the per-project byte budget.
#[derive(Debug)]
pub struct Checkpoints {
    storage: Arc<Storage>,
    /// `[limits] checkpoint_bytes`: most blob bytes one project's checkpoints keep.
    budget: u64,
    /// One change of the checkpoint files at a time in this host, and this host's count of
    /// the bytes each project's checkpoints keep: filled by one scan of a project's
    /// checkpoints, then kept up to date as they are added, so recording does not read every
    /// manifest of the project (it did, per recorded path: quadratic over a project's life).
    /// The project is scanned again only when a record would pass the budget.
    lock: Mutex<HashMap<ProjectId, u64>>,
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
            lock: Mutex::new(HashMap::new()),
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
            manifest: None,
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
            Ok(runs.iter().map(|(_, m)| summary(m)).collect())
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
            let mut usage = store.lock.lock().unwrap_or_else(|p| p.into_inner());
            usage.remove(&project);
            let Some(checkpoints) = store.project_dir(&project, false)? else {
                return Ok(());
            };
            match checkpoints.remove_dir_all(conversation.as_str()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => stored::sync_dir(&checkpoints),
            }
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
            let runs = store.conversation_runs(&project, &conversation)?;
            let (run_dir, manifest) = runs
                .into_iter()
                .find(|(_, m)| m.run == run)
                .ok_or_else(|| BeforeError::NoRun(run.clone()))?;
            if manifest.evicted {
                return Err(BeforeError::Evicted(run));
            }
            before::find(&manifest.entries, &run_dir, &path, limit)
        })
        .await
    }

    fn undo_now(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        force: bool,
    ) -> Result<Summary, UndoError> {
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let runs = self.conversation_runs(project, conversation)?;
        let (run_dir, mut manifest) = runs
            .into_iter()
            .rev()
            .find(|(_, m)| !m.undone)
            .ok_or(UndoError::Nothing)?;
        if manifest.evicted {
            return Err(UndoError::Evicted(manifest.run));
        }
        let root = self
            .storage
            .existing_project_root(project)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let dir = ProjectDir::new(root, Limits::default());
        if !force {
            let changed: Vec<String> = manifest
                .entries
                .iter()
                .filter(|e| e.after.is_none() || e.after != self.current(&dir, &e.path))
                .map(|e| e.path.clone())
                .collect();
            if !changed.is_empty() {
                return Err(UndoError::Changed(changed));
            }
        }
        for entry in manifest.entries.iter().rev() {
            dir.restore(&entry.path, &entry.before.load(&run_dir)?)?;
        }
        manifest.undone = true;
        manifest.write(&run_dir)?;
        tracing::info!(run = %manifest.run, %conversation, "file changes undone");
        Ok(summary(&manifest))
    }

    /// The fingerprint of what stands at `path` now (`None` when it cannot be read).
    fn current(&self, dir: &ProjectDir, path: &str) -> Option<String> {
        let recorded = dir.snapshot(path, self.budget).ok()?;
        recorded.last().map(|r| fingerprint(&r.node))
    }

    /// `<storage>/<projectId>/checkpoints/`, created when `create`; `None` when missing.
    fn project_dir(&self, project: &ProjectId, create: bool) -> io::Result<Option<Dir>> {
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

    /// The conversation's checkpoints with changes, each with its folder, oldest first.
    fn conversation_runs(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
    ) -> io::Result<Vec<(Dir, Manifest)>> {
        let Some(checkpoints) = self.project_dir(project, false)? else {
            return Ok(Vec::new());
        };
        let conversation_dir = match checkpoints.open_dir_nofollow(conversation.to_string()) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other?,
        };
        let mut runs = runs_in(&conversation_dir)?;
        runs.retain(|(_, m)| changed_anything(m));
        Ok(runs)
    }

    /// Drops the oldest checkpoints of `project` (never the run `keep`) until `needed` more
    /// bytes fit the budget beside the others; returns what the others keep then.
    fn make_room(&self, checkpoints: &Dir, keep: &str, needed: u64) -> io::Result<u64> {
        let mut all = project_runs(checkpoints)?;
        all.retain(|(_, m)| m.run != keep && !m.evicted);
        all.sort_by_key(|(_, m)| m.created_at);
        let mut total: u64 = all.iter().map(|(_, m)| m.bytes).sum();
        for (dir, manifest) in &mut all {
            if total.saturating_add(needed) <= self.budget {
                break;
            }
            total -= manifest.bytes;
            tracing::info!(run = %manifest.run, bytes = manifest.bytes, "checkpoint dropped (limits.checkpoint_bytes)");
            manifest.evict(dir)?;
        }
        Ok(total)
    }
}

/// Every checkpoint of a project (`checkpoints`: its checkpoints folder), in any order.
fn project_runs(checkpoints: &Dir) -> io::Result<Vec<(Dir, Manifest)>> {
    let mut all = Vec::new();
    for conversation in checkpoints.entries()? {
        let conversation = conversation?;
        if conversation.file_type()?.is_dir() {
            let dir = checkpoints.open_dir_nofollow(conversation.file_name())?;
            all.extend(runs_in(&dir)?);
        }
    }
    Ok(all)
}

/// The bytes a project's checkpoints keep (those not dropped), read from their manifests.
fn kept_bytes(checkpoints: &Dir) -> io::Result<u64> {
    Ok(project_runs(checkpoints)?
        .iter()
        .filter(|(_, m)| !m.evicted)
        .map(|(_, m)| m.bytes)
        .sum())
}

/// Every checkpoint in a conversation's folder, oldest first (unreadable ones are skipped
/// and logged).
fn runs_in(conversation_dir: &Dir) -> io::Result<Vec<(Dir, Manifest)>> {
    let mut runs = Vec::new();
    for run in conversation_dir.entries()? {
        let run = run?;
        let dir = conversation_dir.open_dir_nofollow(run.file_name())?;
        match Manifest::read(&dir) {
            Ok(manifest) => runs.push((dir, manifest)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "unreadable checkpoint skipped"),
        }
    }
    runs.sort_by(|a, b| (a.1.created_at, &a.1.run).cmp(&(b.1.created_at, &b.1.run)));
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
    /// `None` until the run's first changing call.
    manifest: Option<Manifest>,
}

/// The paths a call changes: the string values of the tool's `changes_paths` arguments
/// (a missing or non-string one names nothing; the schema check refuses such calls).
pub fn changed_paths(declared: &[String], arguments: &Map<String, Value>) -> Vec<String> {
    declared
        .iter()
        .filter_map(|name| arguments.get(name)?.as_str().map(str::to_owned))
        .collect()
}

impl RunCheckpoint {
    /// Records the earlier state of `paths` (those not recorded by an earlier call of this
    /// run), complete on disk before it returns. `Err` is the refusal the model reads: the
    /// call must not run, since it could not be undone.
    pub async fn before_call(&mut self, paths: Vec<String>, root: &Arc<Dir>) -> Result<(), String> {
        let store = Arc::clone(&self.store);
        let (project, conversation) = (self.project.clone(), self.conversation.clone());
        let mut manifest = self.manifest.take().unwrap_or_else(|| {
            let now = now_ms();
            Manifest::new(format!("{now:013}-{}", self.message), self.message, now)
        });
        let root = Arc::clone(root);
        let (manifest, outcome) = tokio::task::spawn_blocking(move || {
            let outcome = store.record(&project, &conversation, &mut manifest, &paths, &root);
            (manifest, outcome)
        })
        .await
        .map_err(|e| format!("not run: the change could not be recorded for undo ({e})"))?;
        self.manifest = Some(manifest);
        outcome
    }

    /// Records the fingerprints of the run's recorded paths as they are now.
    pub async fn after_call(&mut self, root: &Arc<Dir>) {
        let Some(mut manifest) = self.manifest.take() else {
            return;
        };
        let store = Arc::clone(&self.store);
        let (project, conversation) = (self.project.clone(), self.conversation.clone());
        let root = Arc::clone(root);
        let done = tokio::task::spawn_blocking(move || {
            if let Err(e) = store.fingerprint_after(&project, &conversation, &mut manifest, &root) {
                tracing::error!(error = %e, "checkpoint fingerprints not stored");
            }
            manifest
        })
        .await;
        match done {
            Ok(manifest) => self.manifest = Some(manifest),
            Err(e) => tracing::error!(error = %e, "checkpoint fingerprints not stored"),
        }
    }
}

impl Checkpoints {
    /// The blocking half of [`RunCheckpoint::before_call`].
    fn record(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        manifest: &mut Manifest,
        paths: &[String],
        root: &Dir,
    ) -> Result<(), String> {
        let mut usage = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let failed = |e: io::Error| {
            tracing::error!(error = %e, "checkpoint not written");
            "not run: the change could not be recorded for undo (the server's checkpoint \
             storage failed); try again later"
                .to_owned()
        };
        let dir = ProjectDir::new(root.try_clone().map_err(failed)?, Limits::default());
        let checkpoints = self.project_dir(project, true).map_err(failed)?;
        let checkpoints = checkpoints.ok_or_else(|| failed(io::ErrorKind::NotFound.into()))?;
        let conversation_dir =
            open_or_create(&checkpoints, conversation.as_str()).map_err(failed)?;
        let run_dir = open_or_create(&conversation_dir, &manifest.run).map_err(failed)?;
        let known = (manifest.entries.len(), manifest.paths.len());
        for path in paths {
            let max = self.budget.saturating_sub(manifest.bytes);
            let recorded = dir.snapshot(path, max).map_err(|e| self.refusal(e))?;
            for r in recorded {
                if covered(&manifest.entries, &r.path) {
                    continue;
                }
                let bytes = r.node.content_bytes();
                let used = match usage.get(project) {
                    Some(used) => *used,
                    None => kept_bytes(&checkpoints).map_err(failed)?,
                };
                let used = if used.saturating_add(bytes) <= self.budget {
                    used + bytes
                } else {
                    let others = self
                        .make_room(&checkpoints, &manifest.run, manifest.bytes + bytes)
                        .map_err(failed)?;
                    others + manifest.bytes + bytes
                };
                usage.insert(project.clone(), used);
                let before = manifest.store_node(&run_dir, &r.node).map_err(failed)?;
                let print = fingerprint(&r.node);
                manifest.entries.push(Entry {
                    path: r.path,
                    before,
                    before_print: print.clone(),
                    after: Some(print),
                });
            }
            if !manifest.paths.contains(path) {
                manifest.paths.push(path.clone());
            }
        }
        if (manifest.entries.len(), manifest.paths.len()) == known {
            return Ok(()); // every path was recorded by an earlier call of the run
        }
        if manifest.holds_content() {
            // The names on the way to the run's folder must survive a crash with its blobs.
            let project_dir = self.storage.dir().open_dir_nofollow(project.as_str());
            let on_the_way = [
                project_dir.as_ref().ok(),
                Some(&checkpoints),
                Some(&conversation_dir),
            ];
            for folder in on_the_way.into_iter().flatten() {
                stored::sync_dir(folder).map_err(failed)?;
            }
        }
        manifest.write(&run_dir).map_err(failed)
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

    /// The blocking half of [`RunCheckpoint::after_call`].
    fn fingerprint_after(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        manifest: &mut Manifest,
        root: &Dir,
    ) -> io::Result<()> {
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let dir = ProjectDir::new(root.try_clone()?, Limits::default());
        for entry in &mut manifest.entries {
            entry.after = self.current(&dir, &entry.path);
        }
        let checkpoints = self
            .project_dir(project, true)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let conversation_dir = checkpoints.open_dir_nofollow(conversation.to_string())?;
        let run_dir = conversation_dir.open_dir_nofollow(&manifest.run)?;
        manifest.write(&run_dir)
    }
}

/// Whether `path` is recorded already, itself or inside a recorded folder.
fn covered(entries: &[Entry], path: &str) -> bool {
    entries.iter().any(|e| {
        path == e.path
            || path
                .strip_prefix(e.path.as_str())
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
        let entry = |path: &str| Entry {
            path: path.to_owned(),
            before: stored::StoredNode::Absent,
            before_print: String::new(),
            after: None,
        };
        let entries = [entry("docs")];
        assert!(covered(&entries, "docs"));
        assert!(covered(&entries, "docs/a.txt"));
        assert!(!covered(&entries, "docs2/a.txt"));
        assert!(!covered(&entries, "doc"));
    }

    #[test]
    fn only_string_values_of_declared_arguments_are_changed_paths() {
        let args: Map<String, Value> =
            serde_json::from_str(r#"{"from": "a.txt", "to": "b/", "recursive": true, "path": 3}"#)
                .expect("json");
        let declared = ["from".to_owned(), "to".to_owned(), "path".to_owned()];
        assert_eq!(changed_paths(&declared, &args), ["a.txt", "b/"]);
        assert!(changed_paths(&[], &args).is_empty());
    }
}
