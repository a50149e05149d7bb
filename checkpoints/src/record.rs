//! Recording around one changing call (see the module above): before it, under a share of
//! the project lock held until after it, the earlier state of the paths it names, within the
//! memory and disk budgets; after it, their fingerprints.

use std::{
    io,
    sync::{Arc, Mutex},
    time::{SystemTime, UNIX_EPOCH},
};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rojos_conversations::ConversationId;
use rojos_fs_guard::{PathError, ProjectDir, Shape, Shaped};
use rojos_plugin_api::Limits;

use super::{
    head,
    lock::Held,
    paths::{covered, related, through_link, Change},
    shared::Checkpoints,
    stored::{self, CopyError, Log, Manifest, RecordError},
};
use rojos_project_storage::ProjectId;

/// What a record's head beside its log takes at most, beyond the paths it lists.
const HEAD_BYTES: u64 = 512;

/// [`RunCheckpoint::around`](crate::RunCheckpoint::around): what one call's thread records,
/// [`Recording::before`] the call and [`Recording::after`] it.
pub struct Recording {
    pub(super) store: Arc<Checkpoints>,
    pub(super) project: ProjectId,
    pub(super) conversation: ConversationId,
    pub(super) message: u64,
    pub(super) log: Arc<Mutex<Option<Log>>>,
    pub(super) paths: Vec<Change>,
    pub(super) root: Arc<Dir>,
    /// The project's files as the recording reads them, from before the call to after it.
    pub(super) dir: Option<ProjectDir>,
    /// The paths the call may change, as fs-guard resolved them before it ran; `None`: every
    /// recorded path is fingerprinted again after it (one of them goes through a link).
    pub(super) touched: Option<Vec<String>>,
    /// The share of the project lock, from before the recording to after the fingerprints.
    pub(super) held: Option<Held>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("project", &self.project)
            .field("conversation", &self.conversation)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// Just before the call: the earlier state of its paths recorded; `Err` is the refusal
    /// the model reads (the call must not run, since it could not be undone).
    pub fn before(&mut self) -> Result<(), String> {
        let held = self
            .store
            .hold_for_change(&self.project)
            .map_err(Checkpoints::unrecorded)?;
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
        self.held = Some(held);
        Ok(())
    }

    /// Just after the call, whatever it returned: the fingerprints of the run's recorded
    /// paths as they are now.
    pub fn after(&mut self) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some(log), Some(dir)) = (log.as_mut(), self.dir.as_ref()) {
            let touched = self.touched.as_deref();
            if let Err(e) = self
                .store
                .fingerprint_after(&self.project, log, dir, touched)
            {
                tracing::error!(error = %e, "checkpoint fingerprints not stored");
            }
        }
        self.held = None;
    }
}

/// [`Checkpoints::sharing`]: a share of the project lock around one changing call made
/// outside a chat run (nothing is recorded: such calls cannot be undone).
#[derive(Debug)]
pub struct Sharing {
    store: Arc<Checkpoints>,
    project: ProjectId,
    held: Option<Held>,
}

impl Sharing {
    /// Just before the call: a share of the project lock taken; `Err` when it cannot be.
    pub fn before(&mut self) -> Result<(), String> {
        let held = self.store.hold_for_change(&self.project);
        self.held = Some(held.map_err(Checkpoints::unrecorded)?);
        Ok(())
    }

    /// Just after the call: the share given back.
    pub fn after(&mut self) {
        self.held = None;
    }
}

impl Checkpoints {
    /// What holds a share of `project`'s lock around one changing call made outside a chat
    /// run (over `/mcp`): an undo in the project neither checks nor
    /// restores while it runs.
    pub fn sharing(self: &Arc<Self>, project: &ProjectId) -> Sharing {
        Sharing {
            store: Arc::clone(self),
            project: project.clone(),
            held: None,
        }
    }
}

impl Checkpoints {
    /// What [`super::RunCheckpoint::around`] records before a call: the run's log is created
    /// by its first call that records anything. Returns the paths the call may change, as
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
        let checkpoints = match log.as_ref() {
            Some(log) => &log.folder,
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
        let mut recorded: Vec<(String, Shape)> = Vec::new();
        let mut content = manifest.bytes;
        // First walk: names, types, modes and sizes only (no file is read); the content is
        // copied into the log, in parts, once the record is known to fit.
        for change in paths {
            let shaped = match change {
                Change::Whole(path) => dir.shape(path, self.budget.saturating_sub(content), None),
                Change::Creation(path) => dir.snapshot_creation(path).map(|recorded| {
                    recorded
                        .into_iter()
                        .map(|r| Shaped {
                            path: r.path,
                            shape: Shape::Absent,
                        })
                        .collect()
                }),
            }
            .map_err(|e| self.refusal(Refused::Path(e)))?;
            for r in shaped {
                touched.push(r.path.clone());
                let earlier = manifest.entries.iter().map(|e| e.path.as_str());
                let so_far = recorded.iter().map(|(p, _)| p.as_str());
                if covered(earlier.chain(so_far), &r.path) {
                    continue;
                }
                content += r.shape.content_bytes();
                recorded.push((r.path, r.shape));
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
        // What the record takes on disk: its line and content, the head beside the log
        // (it lists every path the run named), and a new log's first line.
        let listed: u64 = manifest
            .paths
            .iter()
            .chain(&new_paths)
            .map(|p| p.len() as u64 + 3)
            .sum();
        let run = manifest.run.clone();
        let (run_line, disk_before) = match log.as_ref() {
            Some(log) => (0, log.disk()),
            None => (HEAD_BYTES, 0),
        };
        let pending =
            stored::prepare(new_paths, recorded, self.record_bytes).map_err(|e| match e {
                RecordError::TooLarge { .. } => format!(
                    "not run: this change could not be made undoable: {e}. Change fewer \
                     files at a time (a smaller folder), or raise the limit"
                ),
                RecordError::Io(e) => failed(e),
            })?;
        let needed = pending.size() + HEAD_BYTES + listed + run_line;
        let used = match state.kept {
            Some(used) => used,
            None => head::disk_bytes(checkpoints).map_err(failed)?,
        };
        let used = if used.saturating_add(needed) <= self.budget {
            used
        } else {
            let total = self
                .make_room(checkpoints, conversation.as_str(), &run, needed)
                .map_err(failed)?;
            if total.saturating_add(needed) > self.budget {
                state.kept = Some(total);
                return Err(format!(
                    "not run: this change could not be made undoable: its checkpoint would \
                     take {needed} bytes on disk (the earlier content with every name and \
                     folder in it), more than the {} bytes undo keeps per project ([limits] \
                     checkpoint_bytes in rojos.toml: raise it), or change a smaller part at a \
                     time",
                    self.budget
                ));
            }
            total
        };
        let log = match log {
            Some(log) => log,
            None => {
                let missing = || failed(io::ErrorKind::NotFound.into());
                let manifest = fresh.ok_or_else(missing)?;
                let folder = opened.ok_or_else(missing)?;
                log.insert(Log::create(folder, manifest, self.record_bytes).map_err(failed)?)
            }
        };
        // The record's names and entries are held while its content is copied.
        let memory = self.hold_names(pending.line_len())?;
        let synced = log.record_call(pending, dir).map_err(|e| match e {
            CopyError::Io(e) => failed(e),
            CopyError::Path(e) => self.refusal(Refused::Path(e)),
            changed @ CopyError::Changed(_) => format!("not run: {changed}"),
        })?;
        drop(memory);
        state.kept = Some(used + log.disk().saturating_sub(disk_before));
        if synced && !log.names_synced {
            // The names on the way to the run's log must survive a crash with its content.
            if !state.folder_synced {
                let project_dir = self.storage.dir().open_dir_nofollow(project.as_str());
                stored::sync_dir(&project_dir.map_err(failed)?).map_err(failed)?;
                state.folder_synced = true;
            }
            stored::sync_dir(&log.folder).map_err(failed)?;
            log.names_synced = true;
        }
        Ok(touched)
    }

    /// The refusal for a call whose earlier state could not be written (logged).
    pub(super) fn unrecorded(e: io::Error) -> String {
        tracing::error!(error = %e, "checkpoint not written");
        "not run: the change could not be recorded for undo (the server's checkpoint \
         storage failed); try again later"
            .to_owned()
    }

    /// The refusal for a path whose earlier state cannot be recorded.
    fn refusal(&self, refused: Refused) -> String {
        let error = match refused {
            Refused::Memory => {
                return "not run: the server is recording or undoing other changes of many \
                        files and has no room for the names and entries of this one now \
                        ([limits] checkpoint_memory_bytes); try again in a moment"
                    .to_owned()
            }
            Refused::Path(error) => error,
        };
        match error {
            PathError::SnapshotTooLarge { .. } => format!(
                "not run: this change could not be made undoable: {error}. Undo keeps at most \
                 {} bytes per project ([limits] checkpoint_bytes in rojos.toml: raise it), or \
                 change a smaller part at a time",
                self.budget,
            ),
            PathError::NotUndoable { .. } => {
                format!("not run: this change could not be made undoable: {error}")
            }
            other => format!("not run: {other}"),
        }
    }

    /// Holds `bytes` of names and entries in [`super::memory::Memory`] (`[limits]
    /// checkpoint_memory_bytes`) while a record's or an undo's content is copied; refused at
    /// once when they are more than all of it, or when they are not free in time.
    pub(super) fn hold_names(&self, bytes: u64) -> Result<super::memory::Held<'_>, String> {
        if bytes > self.memory.cap() {
            return Err(format!(
                "not run: this change could not be made undoable: its checkpoint record would \
                 hold {bytes} bytes of names and entries, more than the {} bytes all \
                 recordings and undos may hold at once ([limits] checkpoint_memory_bytes in \
                 rojos.toml: raise it), or change fewer files at a time",
                self.memory.cap()
            ));
        }
        self.memory
            .take(bytes)
            .ok_or_else(|| self.refusal(Refused::Memory))
    }

    /// What [`super::RunCheckpoint::around`] records after a call.
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
        let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
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
        let before = log.disk();
        log.record_after(prints)?;
        if let Some(kept) = state.kept.as_mut() {
            *kept += log.disk().saturating_sub(before);
        }
        Ok(())
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

/// Now, in Unix milliseconds.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
