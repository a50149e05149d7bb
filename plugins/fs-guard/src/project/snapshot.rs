//! Snapshots and restores of the entries a changing tool call names, for the host's undo
//! (docs/api.md "Undo of file changes"). A path is resolved exactly as the changing
//! operations resolve it (its folder beneath the root, following in-root symlinks; its last
//! name never followed), and everything below it is read and recreated through folder
//! handles opened with `O_NOFOLLOW`, like the recursive delete (`tree`): a folder swapped for
//! a symlink cannot make a snapshot read, or a restore write, outside the root.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{atomic_write::create_new_file, tree, ProjectDir, KEPT_MODE_BITS};
use crate::error::{from_io, PathError, Shown};
use crate::path::{check_path, Entry, PathUse};

/// What stood at one path: enough to put it back byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Nothing.
    Absent,
    /// A regular file: its bytes and its permission bits (`0o777` at most, as writes keep).
    File {
        /// The permission bits.
        mode: u32,
        /// The content.
        bytes: Vec<u8>,
    },
    /// A folder and everything in it.
    Folder {
        /// The permission bits.
        mode: u32,
        /// Its entries by name.
        entries: BTreeMap<String, Node>,
    },
    /// A symbolic link, as a link (its target is never followed).
    Symlink {
        /// The link's target text.
        target: String,
    },
}

impl Node {
    /// The content bytes this node holds (files' bytes and links' targets, everything below).
    pub fn content_bytes(&self) -> u64 {
        match self {
            Node::Absent => 0,
            Node::File { bytes, .. } => bytes.len() as u64,
            Node::Symlink { target } => target.len() as u64,
            Node::Folder { entries, .. } => entries.values().map(Node::content_bytes).sum(),
        }
    }
}

/// One path of a snapshot and what stood there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The path, relative to the root, without empty and `.` parts.
    pub path: String,
    /// What stood there.
    pub node: Node,
}

/// How many folders deep a snapshot or a restore goes.
pub(super) const MAX_DEPTH: usize = tree::MAX_DELETE_DEPTH;

impl ProjectDir {
    /// What a changing call on `path` may change, as it is now: each missing folder on the
    /// way (a write or a new folder creates them), then the entry itself with everything in
    /// it. The root itself records nothing (no tool replaces it). At most `max_bytes` of
    /// content are read.
    ///
    /// # Errors
    ///
    /// [`PathError::SnapshotTooLarge`] over `max_bytes`; [`PathError::NotUndoable`] for a
    /// FIFO, socket, device or a name that is not UTF-8; a path ending in `.` or `..`
    /// ([`PathError::NotAnEntry`]); the resolution errors of the path's folders.
    pub fn snapshot(&self, path: &str, max_bytes: u64) -> Result<Vec<Recorded>, PathError> {
        self.record(path, max_bytes, true)
    }

    /// What a call that only creates `path` may change, as it is now: each missing folder on
    /// the way, then the entry itself if it is missing. What exists there is left out: such a
    /// call leaves it as it is (`create_directory` on an existing folder), so nothing of it
    /// is read.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::snapshot`].
    pub fn snapshot_creation(&self, path: &str) -> Result<Vec<Recorded>, PathError> {
        self.record(path, 0, false)
    }

    /// [`ProjectDir::snapshot`], and with `existing` false [`ProjectDir::snapshot_creation`].
    fn record(
        &self,
        path: &str,
        max_bytes: u64,
        existing: bool,
    ) -> Result<Vec<Recorded>, PathError> {
        let Some((parent, leaf, full)) = recorded_entry(path)? else {
            return Ok(Vec::new());
        };
        let folders: Vec<&str> = parent.split('/').filter(|p| *p != ".").collect();
        let folder = self.open_folder(&parent);
        // A folder that opens has every folder on its way: only when it does not can one be
        // missing, so only then is each looked at (one lookup each, walking the path again).
        let mut recorded = Vec::new();
        if folder.is_err() {
            self.record_missing_folders(&folders, path, &mut recorded)?;
        }
        let node = match folder {
            Ok(folder) if !existing => {
                match rustix::fs::statat(folder.as_fd(), leaf, AtFlags::SYMLINK_NOFOLLOW) {
                    Err(Errno::NOENT) => Node::Absent,
                    Ok(_) => return Ok(recorded),
                    Err(e) => return Err(from_io(path, e.into())),
                }
            }
            Ok(folder) => {
                let mut budget = Budget {
                    left: max_bytes,
                    max: max_bytes,
                };
                read_node(folder.as_fd(), leaf, &full, &mut budget, 0)?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Node::Absent,
            Err(e) => return Err(from_io(path, e)),
        };
        recorded.push(Recorded { path: full, node });
        Ok(recorded)
    }

    /// Records each of `folders` (the names on the way to an entry) that is missing, as
    /// [`Node::Absent`]: a write or a new folder creates them.
    pub(super) fn record_missing_folders(
        &self,
        folders: &[&str],
        path: &str,
        recorded: &mut Vec<Recorded>,
    ) -> Result<(), PathError> {
        let mut prefix = String::new();
        for part in folders {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            match self.dir.symlink_metadata(&prefix) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => recorded.push(Recorded {
                    path: prefix.clone(),
                    node: Node::Absent,
                }),
                Err(e) => return Err(from_io(path, e)),
            }
        }
        Ok(())
    }

    /// Puts `node` back at `path` (a path [`ProjectDir::snapshot`] recorded): whatever stands
    /// there now is removed (a link as a link, a folder with everything in it), then the
    /// file, folder or link is created again through its folder's handle, with its mode.
    /// Missing folders on the way are created. Modification times are not restored.
    ///
    /// # Errors
    ///
    /// The resolution errors of the path's folders (a folder swapped for a symlink that leads
    /// out is [`PathError::Outside`]), and the errors of removing and creating.
    pub fn restore(&self, path: &str, node: &Node) -> Result<(), PathError> {
        let rel = check_path(path, PathUse::Existing)?;
        let (parent, leaf) = match rel.entry() {
            Entry::Named { parent, leaf, .. } => (parent, leaf),
            Entry::Root => return Err(PathError::Root { action: "restored" }),
            Entry::Dotted => {
                return Err(PathError::NotAnEntry {
                    path: Shown::new(path),
                })
            }
        };
        let io = |e| from_io(path, e);
        let folder = match self.open_folder(&parent) {
            Ok(folder) => folder,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && *node == Node::Absent => {
                return Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.dir.create_dir_all(&parent).map_err(io)?;
                self.open_folder(&parent).map_err(io)?
            }
            Err(e) => return Err(io(e)),
        };
        match folder.symlink_metadata(leaf) {
            Ok(_) => tree::remove(&folder, leaf, path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        write_node(&folder, leaf, path, node, 0)?;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))
    }
}

/// What is left of a snapshot's byte limit.
pub(super) struct Budget {
    pub(super) left: u64,
    pub(super) max: u64,
}

impl Budget {
    pub(super) fn take(&mut self, bytes: u64, path: &str) -> Result<(), PathError> {
        self.left = self
            .left
            .checked_sub(bytes)
            .ok_or_else(|| PathError::SnapshotTooLarge {
                path: Shown::new(path),
                limit: self.max,
            })?;
        Ok(())
    }
}

/// Reads the entry `name` of `folder` (never following it), with everything below it.
fn read_node(
    folder: BorrowedFd<'_>,
    name: &str,
    path: &str,
    budget: &mut Budget,
    depth: usize,
) -> Result<Node, PathError> {
    let io = |e: Errno| from_io(path, e.into());
    let stat = match rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(Node::Absent),
        Err(e) => return Err(io(e)),
    };
    let mode = stat.st_mode & KEPT_MODE_BITS;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
            let fd = rustix::fs::openat(folder, name, flags | OFlags::CLOEXEC, Mode::empty())
                .map_err(io)?;
            let opened = rustix::fs::fstat(&fd).map_err(io)?;
            if FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile {
                return Err(PathError::Changed {
                    path: Shown::new(path),
                });
            }
            // Sized from the file (within the budget): read in one go, not in growing steps.
            let expected = u64::try_from(opened.st_size).unwrap_or(0).min(budget.left);
            let mut bytes = Vec::with_capacity(usize::try_from(expected).unwrap_or(0) + 1);
            std::fs::File::from(fd)
                .take(budget.left.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|e| from_io(path, e))?;
            budget.take(bytes.len() as u64, path)?;
            Ok(Node::File { mode, bytes })
        }
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(folder, name, Vec::new()).map_err(io)?;
            let target = target
                .into_string()
                .map_err(|_| not_undoable(path, "a link whose target is not UTF-8"))?;
            budget.take(target.len() as u64, path)?;
            Ok(Node::Symlink { target })
        }
        FileType::Directory => read_folder(folder, name, path, mode, budget, depth),
        _ => Err(not_undoable(path, "a FIFO, socket or device")),
    }
}

/// Reads the folder `name` of `folder` through a handle opened with `O_NOFOLLOW`.
fn read_folder(
    folder: BorrowedFd<'_>,
    name: &str,
    path: &str,
    mode: u32,
    budget: &mut Budget,
    depth: usize,
) -> Result<Node, PathError> {
    let io = |e: Errno| from_io(path, e.into());
    if depth >= MAX_DEPTH {
        return Err(PathError::TooDeep {
            path: Shown::new(path),
            max: MAX_DEPTH,
        });
    }
    let handle = open_folder_nofollow(folder, name).map_err(io)?;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(&handle).map_err(io)? {
        let entry = entry.map_err(io)?;
        let entry_name = entry.file_name();
        if entry_name == c"." || entry_name == c".." {
            continue;
        }
        let entry_name = entry_name
            .to_str()
            .map_err(|_| not_undoable(path, "a folder holding a name that is not UTF-8"))?;
        names.push(entry_name.to_owned());
    }
    let mut entries = BTreeMap::new();
    for entry_name in names {
        let below = format!("{path}/{entry_name}");
        let node = read_node(handle.as_fd(), &entry_name, &below, budget, depth + 1)?;
        entries.insert(entry_name, node);
    }
    Ok(Node::Folder { mode, entries })
}

/// Creates `node` as the entry `name` of `folder` (nothing stands there).
fn write_node(
    folder: &impl AsFd,
    name: &str,
    path: &str,
    node: &Node,
    depth: usize,
) -> Result<(), PathError> {
    let folder = folder.as_fd();
    let io = |e: Errno| from_io(path, e.into());
    match node {
        Node::Absent => Ok(()),
        Node::File { mode, bytes } => {
            let dir = Dir::from_std_file(std::fs::File::from(
                rustix::io::fcntl_dupfd_cloexec(folder, 0).map_err(io)?,
            ));
            create_new_file(&dir, name, path, bytes)?;
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(folder, name, flags, Mode::empty()).map_err(io)?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & KEPT_MODE_BITS)).map_err(io)?;
            rustix::fs::fsync(&fd).map_err(io)
        }
        Node::Symlink { target } => {
            rustix::fs::symlinkat(target.as_str(), folder, name).map_err(io)
        }
        Node::Folder { mode, entries } => {
            if depth >= MAX_DEPTH {
                return Err(PathError::TooDeep {
                    path: Shown::new(path),
                    max: MAX_DEPTH,
                });
            }
            rustix::fs::mkdirat(folder, name, Mode::from_raw_mode(0o700)).map_err(io)?;
            let handle = open_folder_nofollow(folder, name).map_err(io)?;
            for (entry_name, entry) in entries {
                let below = format!("{path}/{entry_name}");
                write_node(&handle, entry_name, &below, entry, depth + 1)?;
            }
            rustix::fs::fchmod(&handle, Mode::from_raw_mode(mode & KEPT_MODE_BITS)).map_err(io)?;
            rustix::fs::fsync(&handle).map_err(io)
        }
    }
}
/// The entry a recording of `path` is about: the folder that holds it (`.` for the root),
/// its name, and its path as records name it (the folders without `.` parts, then the name).
/// `None` for the root itself, which is never recorded.
pub(super) fn recorded_entry(path: &str) -> Result<Option<(String, &str, String)>, PathError> {
    let rel = check_path(path, PathUse::Existing)?;
    let (parent, leaf) = match rel.entry() {
        Entry::Named { parent, leaf, .. } => (parent, leaf),
        Entry::Root => return Ok(None),
        Entry::Dotted => {
            return Err(PathError::NotAnEntry {
                path: Shown::new(path),
            })
        }
    };
    let full = parent
        .split('/')
        .filter(|p| *p != ".")
        .chain(std::iter::once(leaf))
        .collect::<Vec<_>>()
        .join("/");
    Ok(Some((parent, leaf, full)))
}

/// Opens the folder `name` of `folder`, refusing a symlink (`ELOOP`) or anything else.
pub(super) fn open_folder_nofollow(folder: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, Errno> {
    let name = CString::new(name).map_err(|_| Errno::INVAL)?;
    rustix::fs::openat(folder, &name, super::tree::FOLDER_NOFOLLOW, Mode::empty())
}

pub(super) fn not_undoable(path: &str, what: &'static str) -> PathError {
    PathError::NotUndoable {
        path: Shown::new(path),
        what,
    }
}
