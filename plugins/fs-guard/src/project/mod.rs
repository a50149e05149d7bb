//! `ProjectDir`: the project root as a `cap-std` capability, and every file operation the
//! tools perform on it, after the syntactic checks of `path`. Each path is resolved once, by
//! the kernel, beneath the root (`openat2` with `RESOLVE_BENEATH`), so no path the model sends
//! reaches outside it. The operations come in two halves: `read` (meta, text, listing) and
//! `change` (write, create, delete, move; with `change_target`, what stands at a name before a
//! change, and `atomic_write`, a file written whole through a temporary one). Creations,
//! replacements, moves and deletions act on the last name through an open handle of its
//! parent folder, and a recursive delete walks down by folder handles opened with
//! `O_NOFOLLOW` (see `tree`).

use std::os::fd::BorrowedFd;

use cap_std::fs::{Dir, Metadata};
use rojos_plugin_api::{CallContext, ErrorKind, Limits, ToolError};
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::{describe_type, PathError, Shown};

mod atomic_write;
mod change;
mod change_target;
mod entry;
mod first_names;
mod move_fallback;
mod read;
mod shape;
mod snapshot;
mod staged;
mod tree;

use first_names::FirstNames;

pub use entry::{EntryType, ListEntry};
pub use read::OpenedFile;
pub use shape::{Shape, Shaped, Visit};
pub use snapshot::{Node, Recorded};
pub use staged::StagedWrite;
pub use tree::MAX_DELETE_DEPTH;

/// The permission bits a rewritten file keeps from the file it replaces: read, write and
/// execute for owner, group and others. Setuid, setgid and sticky (`0o7000`) are dropped, so
/// a write never turns new content into a privileged executable. New files are created
/// `0o666` and folders `0o777`, less the umask, so they never get those bits either.
const KEPT_MODE_BITS: u32 = 0o777;

/// What a write does when its name already holds a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfExists {
    /// Replace the file (atomically, keeping its mode): what `write_text_content` does.
    Replace,
    /// Refuse with [`PathError::AlreadyExists`], and never replace a file created meanwhile.
    Refuse,
    /// Replace the file only if its content still has this version, compared just before the
    /// new file is renamed onto it; otherwise refuse with [`PathError::Stale`] (also when no
    /// file stands at the name any more). Stale-write protection: docs/tools.md.
    ReplaceIfVersion(crate::ContentVersion),
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Whether a file stood at the name before and was replaced.
    pub replaced: bool,
}

/// What `read_path_meta` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PathMeta {
    /// File or folder (after following in-root symlinks).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Size in bytes; for a folder, what the file system reports.
    pub size: u64,
    /// Last modification, RFC 3339 in UTC, whole seconds (`2026-04-20T10:11:12Z`).
    #[serde(rename = "modifiedAt")]
    pub modified_at: String,
}

/// A folder listing in listing order (folders first, then files, each group by name), cut at
/// `max_list_entries`: a cut listing keeps its folders first, then the first files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The entries returned, at most `max_list_entries`, folders first.
    pub entries: Vec<ListEntry>,
    /// How many entries could have been listed.
    pub total: usize,
}

impl Listing {
    /// Whether entries were left out because of `max_list_entries`.
    pub fn truncated(&self) -> bool {
        self.total > self.entries.len()
    }

    /// How many entries were left out because of `max_list_entries`.
    pub fn omitted(&self) -> usize {
        self.total.saturating_sub(self.entries.len())
    }

    /// The tool result: the plain array, or
    /// `{"entries":[…],"truncated":true,"total":N,"omitted":M}` when the listing was cut.
    pub fn to_json(&self) -> Value {
        let entries = Value::Array(
            self.entries
                .iter()
                .map(|e| json!({ "name": e.name, "type": e.kind }))
                .collect(),
        );
        if self.truncated() {
            json!({
                "entries": entries,
                "truncated": true,
                "total": self.total,
                "omitted": self.omitted(),
            })
        } else {
            entries
        }
    }
}

/// The project root of one call, with the limits to apply. Every method takes the model's
/// relative path string and never touches anything outside the root.
#[derive(Debug)]
pub struct ProjectDir {
    dir: Dir,
    limits: Limits,
    /// The call's [`CallContext::create_only`] paths: a write there never replaces a file.
    create_only: Vec<String>,
}

impl ProjectDir {
    /// Wraps an open root folder (for the host and tests).
    pub fn new(dir: Dir, limits: Limits) -> Self {
        ProjectDir {
            dir,
            limits,
            create_only: Vec::new(),
        }
    }

    /// Whether the call may only create at `path` ([`CallContext::create_only`]).
    fn create_only(&self, path: &str) -> bool {
        self.create_only.iter().any(|only| only == path)
    }

    /// The root folder it wraps (for the host, which checks paths beneath it itself).
    pub fn root(&self) -> &Dir {
        &self.dir
    }

    /// Opens the call's project root by duplicating the host's `root_fd` (the host keeps
    /// owning and closes its own descriptor).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::INTERNAL`] if the descriptor is negative, closed or not a folder: a host
    /// bug, not something the model can fix.
    pub fn from_context(ctx: &CallContext) -> Result<Self, ToolError> {
        let internal =
            |what: String| ToolError::new(ErrorKind::INTERNAL, format!("call context: {what}"));
        if ctx.root_fd < 0 {
            return Err(internal(format!(
                "root_fd {} is not a descriptor",
                ctx.root_fd
            )));
        }
        // SAFETY: `root_fd` is non-negative, and the host keeps it open for the whole call
        // (the plugin-api contract of `CallContext::root_fd`). We only borrow it long enough
        // to duplicate it; the duplicate is ours to close, the original stays the host's.
        let borrowed = unsafe { BorrowedFd::borrow_raw(ctx.root_fd) };
        let owned = borrowed
            .try_clone_to_owned()
            .map_err(|e| internal(format!("root_fd {} cannot be duplicated: {e}", ctx.root_fd)))?;
        let stat = rustix::fs::fstat(&owned)
            .map_err(|e| internal(format!("root_fd {} cannot be inspected: {e}", ctx.root_fd)))?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Directory {
            return Err(internal(format!("root_fd {} is not a folder", ctx.root_fd)));
        }
        let dir = Dir::from_std_file(std::fs::File::from(owned));
        let mut project = ProjectDir::new(dir, ctx.limits);
        project.create_only.clone_from(&ctx.create_only);
        Ok(project)
    }
}

/// File or folder, else `None`.
fn entry_type(meta: &Metadata) -> Option<EntryType> {
    if meta.is_file() {
        Some(EntryType::File)
    } else if meta.is_dir() {
        Some(EntryType::Directory)
    } else {
        None
    }
}

/// The refusal for a special file at `path`.
fn special(path: &str, meta: &Metadata) -> PathError {
    PathError::Special {
        path: Shown::new(path),
        what: describe_type(&meta.file_type()),
    }
}

/// The refusal for a path ending in `/` whose entry (not followed) is not a folder.
fn not_a_folder(path: &str, meta: &Metadata) -> PathError {
    if meta.file_type().is_symlink() {
        // `link/` would mean the folder the link points to: the model must say which.
        special(path, meta)
    } else {
        PathError::NotADirectory {
            path: Shown::new(path),
        }
    }
}

/// The size of a regular file within `limit`, or why it cannot be read.
fn regular_size(path: &str, meta: &Metadata, limit: u64) -> Result<u64, PathError> {
    if meta.is_dir() {
        return Err(PathError::IsADirectory {
            path: Shown::new(path),
        });
    }
    if !meta.is_file() {
        return Err(special(path, meta));
    }
    if meta.len() > limit {
        return Err(PathError::FileTooLarge {
            path: Shown::new(path),
            size: meta.len(),
            limit,
        });
    }
    Ok(meta.len())
}

#[cfg(test)]
mod bytes_tests;
#[cfg(test)]
mod change_tests;
#[cfg(test)]
mod nfs_like_mount;
#[cfg(test)]
mod nfs_like_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod staged_tests;
#[cfg(test)]
mod stale_tests;
#[cfg(test)]
mod tests;
