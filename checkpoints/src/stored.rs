//! A checkpoint on disk: one append-only log per run,
//! `<storage>/<projectId>/checkpoints/<conversationId>.<run>.log`. Each record is one line of
//! JSON, followed by the bytes of the files it recorded when it has any:
//!
//! - `run`: the first record (format version, run id, message index, creation time);
//! - `call`: the paths one call named and what they held before it (files' bytes follow);
//! - `after`: the fingerprints of every recorded path after a changing call;
//! - `undone`: the run's changes were undone.
//!
//! A record that holds earlier content is synced (`fdatasync`) before the call runs, so the
//! only copy of bytes a tool replaces or deletes survives a crash; records of absences (new
//! files and folders) and fingerprints are not: a crash may lose them, which loses the undo
//! of a creation or makes an undo ask for `force`, never a file. A crash in the middle of an
//! append leaves a torn last record (the file ends inside it), which reading ignores (the
//! next append overwrites it). A record line is at most `[limits] checkpoint_record_bytes`
//! long: a change whose record would be longer is refused before it runs, and a longer line
//! found in a log that goes on after it is not taken for a torn end: the log is unreadable
//! (listed so, never skipped over to an earlier run).
//! One file per run, written by appending, keeps a changing call to one write and at most
//! one sync, and creates one file per run, in one folder per project, instead of folders of
//! replaced manifests and blobs: creating and deleting many small files and folders is what
//! made ext4's inode allocation the hot spot of `rojos-bench` S2 (bench/PROFILE.md). A
//! dropped (evicted) checkpoint is rewritten without its content and entries, keeping the
//! paths the run named (temporary file, sync, rename, sync of the folder). Each log has a
//! small head beside it (`head`), rewritten after every record.
//! docs/api.md "Undo of file changes" describes the layout.
//!
//! # Layout
//!
//! - `format`: the records, the [`Manifest`] they make, the log's file name.
//! - `log`: [`Log`], appending records and reading content back; [`prepare`], a call's
//!   record made before anything is written.
//! - `copy`: files' content copied into the log and read back out.
//! - `evict`: a run's content dropped for room, a dropped run removed.
//! - `dir`: the log's folders, synced and created.

mod copy;
mod dir;
mod evict;
mod format;
mod log;
#[cfg(test)]
mod tests;

pub(super) use dir::{open_or_create, sync_dir};
pub(super) use evict::{evict, remove};
pub(super) use format::{log_parts, Manifest, StoredNode};
pub(super) use log::{prepare, CopyError, Log, RecordError};
