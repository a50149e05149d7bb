//! Putting a run's earlier state back ([`Checkpoints::undo`]): the project lock held whole
//! from the check to the end of the restore, only the run asked for (or the last one, never
//! one before a run that cannot be undone), every earlier state read and checked before
//! anything is put back, its content streamed from the log in parts.

use std::io;

use rojos_conversations::ConversationId;
use rojos_fs_guard::{PathError, ProjectDir};
use rojos_plugin_api::Limits;

use super::{
    fingerprint::Hasher,
    shared::Checkpoints,
    stored::Log,
    summary::{summary, Summary},
};
use rojos_project_storage::ProjectId;

/// Why an undo did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// No run of the conversation has file changes left to undo.
    #[error("no run of this conversation has file changes left to undo")]
    Nothing,
    /// The undo named a run that is not the last one not yet undone.
    #[error("run {asked} is not the last run of this conversation not yet undone ({last} is): nothing was changed; list the checkpoints again and undo {last} first")]
    NotLast {
        /// The run asked for.
        asked: String,
        /// The run an undo would revert.
        last: String,
    },
    /// The last run's checkpoint was dropped to keep within the budget.
    #[error("the file changes of run {0} can no longer be undone: its checkpoint was dropped to keep within limits.checkpoint_bytes")]
    Evicted(String),
    /// The last run's checkpoint cannot be read; no earlier run is undone in its place.
    #[error("the file changes of run {0} cannot be undone: its checkpoint cannot be read ({1}); nothing was changed, and no earlier run is undone in its place")]
    Unreadable(String, String),
    /// A recorded earlier state no longer matches its fingerprint (the log was damaged).
    #[error("the checkpoint of '{0}' is damaged (its recorded bytes no longer match their fingerprint): this run can no longer be undone; nothing was changed")]
    Damaged(String),
    /// Paths changed since the run; the undo would lose those changes.
    #[error("{} changed since this run; undoing it would lose those changes. Undo anyway with {{\"force\": true}}", list(.0))]
    Changed(Vec<String>),
    /// Changes of the project's files (another run's tool calls, uploads) did not end in
    /// time for the undo to hold the project's lock.
    #[error("the project's files are being changed (a tool call of another run, or an upload) and did not finish within {0} seconds: nothing was undone; try again when they end")]
    Busy(u64),
    /// The host's checkpoint memory did not have room for the run's names and entries in
    /// time.
    #[error("the server is recording or undoing other changes of many files and has no room for the names and entries of this undo now (limits.checkpoint_memory_bytes): nothing was undone; try again in a moment")]
    Memory,
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
    pub(super) fn undo_now(
        &self,
        project: &ProjectId,
        conversation: &ConversationId,
        force: bool,
        asked: Option<&str>,
    ) -> Result<Summary, UndoError> {
        let _whole = self
            .locks
            .whole(&self.storage, project)?
            .ok_or(UndoError::Busy(super::lock::UNDO_WAIT.as_secs()))?;
        let lock = self.project_lock(project);
        let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (checkpoints, runs) = self
            .conversation_runs(project, conversation)?
            .ok_or(UndoError::Nothing)?;
        let head = runs
            .into_iter()
            .rev()
            .find(|h| !h.undone)
            .ok_or(UndoError::Nothing)?;
        if let Some(asked) = asked.filter(|asked| *asked != head.run) {
            return Err(UndoError::NotLast {
                asked: asked.to_owned(),
                last: head.run,
            });
        }
        if let Some(why) = head.unreadable {
            return Err(UndoError::Unreadable(head.run, why));
        }
        if head.evicted {
            return Err(UndoError::Evicted(head.run));
        }
        let mut log = Log::open(
            &checkpoints,
            conversation.as_str(),
            &head.run,
            self.record_bytes,
        )
        .map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => UndoError::Unreadable(head.run.clone(), e.to_string()),
            _ => UndoError::Io(e),
        })?;
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
        // Every earlier state is read back and checked against its fingerprint before
        // anything is put back (a damaged log stops the undo with nothing changed), then put
        // back: both stream the content from the log in parts; only the names and entries
        // are held, within the host's checkpoint memory.
        let _memory = self
            .memory
            .take(log.manifest.longest.min(self.memory.cap()))
            .ok_or(UndoError::Memory)?;
        for entry in &log.manifest.entries {
            let mut hasher = Hasher::default();
            log.visit(&entry.before, &mut hasher)?;
            if hasher.finish() != entry.before_print {
                tracing::error!(run = %log.manifest.run, path = %entry.path, "damaged checkpoint");
                return Err(UndoError::Damaged(entry.path.clone()));
            }
        }
        for entry in log.manifest.entries.iter().rev() {
            let shape = entry.before.shape();
            dir.restore_shape(&entry.path, &shape, &mut |at, size, out| {
                log.copy_to(at, size, out)
            })?;
        }
        let before = log.disk();
        log.record_undone()?;
        if let Some(kept) = state.kept.as_mut() {
            *kept += log.disk().saturating_sub(before);
        }
        tracing::info!(run = %log.manifest.run, %conversation, "file changes undone");
        Ok(summary(&log.manifest.head()))
    }
}
