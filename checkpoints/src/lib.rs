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
//! The crate knows no plugin and no HTTP: the host runs a [`Recording`] (a [`Sharing`] for a
//! changing call outside a run) around a plugin call, and its handlers list, undo and read
//! the text before a run through [`Checkpoints`]. It stands on `rojos-project-storage` (the project
//! folders), `rojos-fs-guard` (shapes walked and restored) and `rojos-conversations` (ids).
//!
//! # Layout
//!
//! - this file: the API the handlers and the agent use ([`Checkpoints::run`], `list`, `undo`,
//!   `forget`, `before`) and [`RunCheckpoint`], a run's recording around each call.
//! - `shared`: [`Checkpoints`], what every recording, undo and listing shares.
//! - `paths`: the paths a call changes ([`Change`]) and how recorded paths relate.
//! - `summary`: [`Summary`], a checkpoint as the API lists it.
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
mod paths;
mod record;
mod room;
mod shared;
mod stored;
mod summary;
mod undo;

use std::{
    io,
    sync::{Arc, Mutex},
};

use cap_std::fs::Dir;
use rojos_conversations::ConversationId;

pub use before::{Before, BeforeError};
pub use lock::Held;
pub use paths::{changed_paths, Change};
pub use record::{Recording, Sharing};
pub use shared::{CheckpointLimits, Checkpoints};
pub use summary::Summary;
pub use undo::UndoError;

use rojos_project_storage::ProjectId;
use stored::Log;
use summary::summary;

impl Checkpoints {
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

impl RunCheckpoint {
    /// The recording around one call that changes `paths`: before it, the earlier state of
    /// those not recorded by an earlier call of this run, complete on disk (its `Err` is the
    /// refusal the model reads: the call must not run, since it could not be undone); after
    /// it, the fingerprints of the run's recorded paths as they are then.
    pub fn around(&self, paths: Vec<Change>, root: &Arc<Dir>) -> Recording {
        Recording {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rojos_project_storage::Storage;

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
}
