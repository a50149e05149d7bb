//! Undo of a run's file changes (docs/api.md "Undo of file changes"). Around each call of a
//! tool that declares `changes_paths` or `creates_paths` inside a chat run, on the call's own
//! thread ([`RunCheckpoint::around`]): before it, the earlier state of exactly the paths its
//! arguments name (through fs-guard's [`ProjectDir::shape`], which resolves them as the
//! tool will; only what is missing for a path the tool only creates), files' content copied
//! into the log in parts, never held whole; after it, their fingerprints.
//! [`Checkpoints::undo`] puts the earlier state back (through
//! [`ProjectDir::restore_shape`], content again streamed from the log) when every path is
//! still as the run left it. Checkpoints live in `<storage>/<projectId>/checkpoints/`, beside `root/`, where
//! no tool reaches, one log per run, within `[limits] checkpoint_bytes` per project (what
//! they take on disk, oldest dropped first).
//!
//! # Layout
//!
//! - `stored`: a run's append-only log on disk.
//! - `head`: the small summary beside each log that listing and the budget read.
//! - `listing`: a project's checkpoints, from their heads (or logs where a head is stale).
//! - `fingerprint`: what "unchanged since the run" compares.
//! - `before`: a file's text before a run, for the panel's line diff.
//! - `lock`: the project lock undo holds from its check to its restore.
//! - `memory`: the names and entries all recordings and undos hold at once.
//! - `record`: what a changing call records before and after it runs.
//! - `room`: keeping a project's checkpoints within the budget.
//! - `undo`: putting a run's earlier state back.

mod before;
mod fingerprint;
mod head;
mod listing;
mod lock;
mod memory;
mod record;
mod room;
mod stored;
mod undo;

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
use serde::Serialize;
use serde_json::{Map, Value};

pub use before::{Before, BeforeError};
pub use lock::Held;
pub use undo::UndoError;

use crate::{
    plugins::AroundCall,
    storage::{Handle, ProjectId, Storage},
};
use head::Head;
use memory::Memory;
use stored::{open_or_create, Log, Manifest, RecordError};

/// The folder beside `root/` that holds a project's checkpoints.
const CHECKPOINTS: &str = "checkpoints";

/// Every project's checkpoints, within the per-project byte budget.
#[derive(Debug)]
pub struct Checkpoints {
    storage: Arc<Storage>,
    /// `[limits] checkpoint_bytes`: most bytes one project's checkpoints take on disk.
    budget: u64,
    /// `[limits] checkpoint_record_bytes`: the longest record line.
    record_bytes: u64,
    /// `[limits] checkpoint_memory_bytes`: the names and entries all of them hold at once.
    memory: Memory,
    /// Each project's [`ProjectLock`] in this host.
    projects: Mutex<HashMap<ProjectId, Arc<ProjectLock>>>,
    /// Each project's lock between its changes and its undos.
    locks: lock::ProjectLocks,
}

/// The limits of [`Checkpoints`] (docs/configuration.md).
#[derive(Clone, Copy, Debug)]
pub struct CheckpointLimits {
    /// `[limits] checkpoint_bytes`: most bytes one project's checkpoints take on disk (`0`:
    /// undo off).
    pub budget: u64,
    /// `[limits] checkpoint_record_bytes`: most bytes of names and entries one record holds.
    pub record_bytes: u64,
    /// `[limits] checkpoint_memory_bytes`: most bytes of names and entries all recordings and
    /// undos of this host hold at once.
    pub memory_bytes: u64,
}

/// One change of a project's checkpoint files at a time in this host (one project's
/// recording waits for no other project's: a record holds this lock through its sync).
type ProjectLock = Mutex<ProjectState>;

/// What this host knows of a project's checkpoints.
#[derive(Debug, Default)]
struct ProjectState {
    /// The bytes they take on disk: `None` until one look at their sizes, then kept up to
    /// date as they are added, so recording does not look at every log of the project (it
    /// did, per recorded path: quadratic over a project's life). Looked at again only when a
    /// record would pass the budget.
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
    /// Whether it can still be undone (false once the budget dropped it, or when its
    /// checkpoint cannot be read).
    pub available: bool,
    /// Why its checkpoint cannot be read (absent when it can): an undo then stops at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

impl Checkpoints {
    /// The checkpoints of projects in `storage`, within `limits`.
    pub fn new(storage: Arc<Storage>, limits: CheckpointLimits) -> Checkpoints {
        Checkpoints {
            storage,
            budget: limits.budget,
            record_bytes: limits.record_bytes,
            memory: Memory::new(limits.memory_bytes),
            projects: Mutex::new(HashMap::new()),
            locks: lock::ProjectLocks::default(),
        }
    }

    /// A share of `project`'s lock for a change of its files made outside a run (an
    /// upload): held until dropped, it waits while an undo in the project checks and
    /// restores, so the undo cannot remove what the change writes (see `lock`).
    ///
    /// # Errors
    ///
    /// The lock cannot be taken (its file cannot be created).
    pub fn hold_for_change(&self, project: &ProjectId) -> io::Result<Held> {
        self.locks.share(&self.storage, project)
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
    /// over changes made since; `run`: only when that is the run's id). The caller holds the
    /// conversation's run lease; the undo holds the project's lock from its check to the end
    /// of its restore.
    ///
    /// # Errors
    ///
    /// See [`UndoError`].
    pub async fn undo(
        self: &Arc<Self>,
        project: &ProjectId,
        conversation: &ConversationId,
        force: bool,
        run: Option<String>,
    ) -> Result<Summary, UndoError> {
        let (store, project, conversation) =
            (Arc::clone(self), project.clone(), conversation.clone());
        blocking(move || store.undo_now(&project, &conversation, force, run.as_deref())).await
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
            let head = runs
                .into_iter()
                .find(|h| h.run == run)
                .ok_or_else(|| BeforeError::NoRun(run.clone()))?;
            if head.evicted {
                return Err(BeforeError::Evicted(run));
            }
            if let Some(why) = head.unreadable {
                return Err(BeforeError::Unreadable(run, why));
            }
            let log = Log::open(
                &checkpoints,
                conversation.as_str(),
                &head.run,
                store.record_bytes,
            )?;
            before::find(&log, &path, limit)
        })
        .await
    }

    /// The lock of `project`'s checkpoints in this host.
    fn project_lock(&self, project: &ProjectId) -> Arc<ProjectLock> {
        let mut projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(projects.entry(project.clone()).or_default())
    }

    /// The fingerprint of what stands at `path` now, its files' bytes streamed through the
    /// hash (`None` when it cannot be read, or holds more than `[limits] checkpoint_bytes`
    /// of content: it is then taken as changed).
    fn current(&self, dir: &ProjectDir, path: &str) -> Option<String> {
        let mut hasher = fingerprint::Hasher::default();
        dir.shape(path, self.budget, Some(&mut hasher)).ok()?;
        Some(hasher.finish())
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

    /// The project's checkpoints folder and the conversation's checkpoints with changes
    /// (or that cannot be read), oldest first, from their heads; `None` when the project
    /// has no such folder.
    fn conversation_runs(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
    ) -> io::Result<Option<(Dir, Vec<Head>)>> {
        let Some(checkpoints) = self.project_dir(project, false)? else {
            return Ok(None);
        };
        let mut runs = listing::scan(&checkpoints, Some(conversation.as_str()), self.record_bytes)?;
        runs.retain(|h| h.changed || h.unreadable.is_some());
        Ok(Some((checkpoints, runs)))
    }
}

fn summary(head: &Head) -> Summary {
    Summary {
        run: head.run.clone(),
        message: head.message,
        created_at: head.created_at,
        paths: head.paths.clone(),
        undone: head.undone,
        available: !head.evicted && head.unreadable.is_none(),
        unreadable: head.unreadable.clone(),
    }
}

/// Why a change was not recorded.
#[derive(Debug)]
enum Refused {
    /// fs-guard's refusal (over the byte limit, not undoable, a bad path).
    Path(PathError),
    /// `[limits] checkpoint_memory_bytes` had no room for its names and entries in time.
    Memory,
}

impl From<PathError> for Refused {
    fn from(error: PathError) -> Refused {
        Refused::Path(error)
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
        Box::new(record::Recording {
            store: Arc::clone(&self.store),
            project: self.project.clone(),
            conversation: self.conversation.clone(),
            message: self.message,
            log: Arc::clone(&self.log),
            paths,
            root: Arc::clone(root),
            dir: None,
            touched: None,
            held: None,
        })
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
        let limits = CheckpointLimits {
            budget: 1 << 20,
            record_bytes: 1 << 20,
            memory_bytes: 1 << 20,
        };
        let store = Arc::new(Checkpoints::new(Arc::clone(&storage), limits));
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
        match store.undo(&project, &conversation, false, None).await {
            Err(UndoError::Changed(paths)) => assert_eq!(paths, ["a.txt"]),
            other => panic!("expected a refusal naming a.txt, got {other:?}"),
        }
        // A later call on a.txt itself takes the file as it stands then.
        call(&run, &root, "a.txt", |r| {
            r.write("a.txt", "again").expect("write")
        });
        store
            .undo(&project, &conversation, false, None)
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
            .undo(&project, &conversation, false, None)
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
