//! [`Checkpoints`]: what every recording, undo and listing of this host shares (the storage,
//! the limits, each project's lock and known size), and the folder and lookups they all use.

use std::{
    collections::HashMap,
    io,
    sync::{Arc, Mutex},
};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rojos_conversations::ConversationId;
use rojos_fs_guard::ProjectDir;

use super::{
    fingerprint,
    head::Head,
    listing,
    lock::{self, Held},
    memory::Memory,
    stored::open_or_create,
};
use rojos_project_storage::{Handle, ProjectId, Storage};

/// The folder beside `root/` that holds a project's checkpoints.
pub(super) const CHECKPOINTS: &str = "checkpoints";

/// Every project's checkpoints, within the per-project byte budget.
#[derive(Debug)]
pub struct Checkpoints {
    pub(super) storage: Arc<Storage>,
    /// `[limits] checkpoint_bytes`: most bytes one project's checkpoints take on disk.
    pub(super) budget: u64,
    /// `[limits] checkpoint_record_bytes`: the longest record line.
    pub(super) record_bytes: u64,
    /// `[limits] checkpoint_memory_bytes`: the names and entries all of them hold at once.
    pub(super) memory: Memory,
    /// Each project's [`ProjectLock`] in this host.
    pub(super) projects: Mutex<HashMap<ProjectId, Arc<ProjectLock>>>,
    /// Each project's lock between its changes and its undos.
    pub(super) locks: lock::ProjectLocks,
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
pub(super) type ProjectLock = Mutex<ProjectState>;

/// What this host knows of a project's checkpoints.
#[derive(Debug, Default)]
pub(super) struct ProjectState {
    /// The bytes they take on disk: `None` until one look at their sizes, then kept up to
    /// date as they are added, so recording does not look at every log of the project (it
    /// did, per recorded path: quadratic over a project's life). Looked at again only when a
    /// record would pass the budget.
    pub(super) kept: Option<u64>,
    /// Whether the `checkpoints` folder's own name was synced into the project folder (a new
    /// log's name then needs only the `checkpoints` folder synced).
    pub(super) folder_synced: bool,
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

    /// The lock of `project`'s checkpoints in this host.
    pub(super) fn project_lock(&self, project: &ProjectId) -> Arc<ProjectLock> {
        let mut projects = self.projects.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(projects.entry(project.clone()).or_default())
    }

    /// The fingerprint of what stands at `path` now, its files' bytes streamed through the
    /// hash (`None` when it cannot be read, or holds more than `[limits] checkpoint_bytes`
    /// of content: it is then taken as changed).
    pub(super) fn current(&self, dir: &ProjectDir, path: &str) -> Option<String> {
        let mut hasher = fingerprint::Hasher::default();
        dir.shape(path, self.budget, Some(&mut hasher)).ok()?;
        Some(hasher.finish())
    }

    /// `<storage>/<projectId>/checkpoints/`, created when `create`; `None` when missing.
    pub(super) fn project_dir(&self, project: &ProjectId, create: bool) -> io::Result<Option<Dir>> {
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
    pub(super) fn conversation_runs(
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
