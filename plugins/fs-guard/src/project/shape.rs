//! Snapshots and restores of the entries a changing tool call names, for the host's undo
//! (docs/api.md "Undo of file changes"). A path is resolved exactly as the changing
//! operations resolve it (its folder beneath the root, following in-root symlinks; its last
//! name never followed), and everything below it is read and recreated through folder
//! handles opened with `O_NOFOLLOW`, like the recursive delete (`tree`): a folder swapped for
//! a symlink cannot make a walk read, or a restore write, outside the root.
//! [`ProjectDir::shape`] keeps only each entry's type, mode, name and size ([`Shape`]); a
//! file's bytes go, in parts through a bounded buffer, to a [`Visit`] (which copies them or
//! hashes them), never whole into memory. [`ProjectDir::restore_shape`] puts a shape back
//! with each file's bytes written by the caller, again in parts.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{atomic_write::create_new_file_from, tree, ProjectDir, KEPT_MODE_BITS};
use crate::error::{from_io, PathError, Shown};
use crate::path::{check_path, Entry, PathUse};

/// What stood at one path, files' bytes left out: a file is its mode, its size and where
/// the caller keeps its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Nothing.
    Absent,
    /// A regular file.
    File {
        /// The permission bits (`0o777` at most).
        mode: u32,
        /// Its size.
        size: u64,
        /// Where its bytes are: from a walk, the bytes of the files before it in the walk
        /// (files in name order, depth first); the caller may keep them anywhere.
        at: u64,
    },
    /// A folder and everything in it.
    Folder {
        /// The permission bits.
        mode: u32,
        /// Its entries by name.
        entries: BTreeMap<String, Shape>,
    },
    /// A symbolic link, as a link.
    Symlink {
        /// The link's target text.
        target: String,
    },
}

impl Shape {
    /// The content bytes this shape stands for (files' sizes and links' targets, everything
    /// below).
    pub fn content_bytes(&self) -> u64 {
        match self {
            Shape::Absent => 0,
            Shape::File { size, .. } => *size,
            Shape::Symlink { target } => target.len() as u64,
            Shape::Folder { entries, .. } => entries.values().map(Shape::content_bytes).sum(),
        }
    }
}

/// One path of a streamed snapshot and what stood there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaped {
    /// The path, relative to the root, without empty and `.` parts.
    pub path: String,
    /// What stood there.
    pub shape: Shape,
}

/// What a walk meets below the path it records, in order (a folder, then each of its
/// entries by name, depth first): enough to hash the tree or copy its files.
pub trait Visit {
    /// Nothing stands there.
    fn absent(&mut self) -> io::Result<()>;
    /// A folder with `entries` entries (each follows, after [`Visit::entry`]).
    fn folder(&mut self, mode: u32, entries: usize) -> io::Result<()>;
    /// The name of the next entry of the folder being walked.
    fn entry(&mut self, name: &str) -> io::Result<()>;
    /// A link.
    fn symlink(&mut self, target: &str) -> io::Result<()>;
    /// A file of `size` bytes at `at` (see [`Shape::File`]): `content` gives exactly them.
    fn file(&mut self, mode: u32, size: u64, at: u64, content: &mut dyn Read) -> io::Result<()>;
}

impl ProjectDir {
    /// What a changing call on `path` may change, as it is now: each missing folder on the
    /// way (a write or a new folder creates them), then the entry itself as a [`Shape`], at
    /// most `max_bytes` of content counted. The root itself records nothing (no tool
    /// replaces it). With `visit`, the entry's tree is walked through it as it is read,
    /// files' bytes streamed.
    ///
    /// # Errors
    ///
    /// [`PathError::SnapshotTooLarge`] over `max_bytes`; [`PathError::NotUndoable`] for a
    /// FIFO, socket, device or a name that is not UTF-8; a path ending in `.` or `..`
    /// ([`PathError::NotAnEntry`]); the resolution errors of the path's folders;
    /// [`PathError::Changed`] when a file's length changed while it was read; the visitor's
    /// errors.
    pub fn shape(
        &self,
        path: &str,
        max_bytes: u64,
        visit: Option<&mut dyn Visit>,
    ) -> Result<Vec<Shaped>, PathError> {
        let Some((parent, leaf, full)) = recorded_entry(path)? else {
            return Ok(Vec::new());
        };
        let (folder, missing) = self.open_entry_folder(&parent, path)?;
        let absent = |path| Shaped {
            path,
            shape: Shape::Absent,
        };
        let mut recorded: Vec<Shaped> = missing.into_iter().map(absent).collect();
        let mut walk = Walk {
            budget: Budget {
                left: max_bytes,
                max: max_bytes,
            },
            at: 0,
            visit,
        };
        let shape = match folder {
            Ok(folder) => walk.node(folder.as_fd(), leaf, &full, 0)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                walk.absent(&full)?;
                Shape::Absent
            }
            Err(e) => return Err(from_io(path, e)),
        };
        recorded.push(Shaped { path: full, shape });
        Ok(recorded)
    }

    /// The folder `parent` that holds the entry `path` names, opened (or why it does not
    /// open), and the paths of the folders on its way that are missing, in order: a write
    /// or a new folder creates them. A folder that opens has every folder on its way: only
    /// when it does not can one be missing, so only then is each looked at (one lookup
    /// each, walking the path again).
    pub(super) fn open_entry_folder(
        &self,
        parent: &str,
        path: &str,
    ) -> Result<(io::Result<Dir>, Vec<String>), PathError> {
        let folder = self.open_folder(parent);
        if folder.is_ok() {
            return Ok((folder, Vec::new()));
        }
        let mut prefix = String::new();
        let mut missing = Vec::new();
        for part in parent.split('/').filter(|p| *p != ".") {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            match self.dir.symlink_metadata(&prefix) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(prefix.clone()),
                Err(e) => return Err(from_io(path, e)),
            }
        }
        Ok((folder, missing))
    }

    /// Puts `shape` back at `path` (a path [`ProjectDir::shape`] recorded): whatever stands
    /// there now is removed (a link as a link, a folder with everything in it), then the
    /// file, folder or link is created again through its folder's handle, with its mode, each
    /// file's bytes written by `content` (given the file's `at` and `size`, and the new file
    /// to write them to, in parts). Missing folders on the way are created. Modification
    /// times are not restored.
    ///
    /// # Errors
    ///
    /// The resolution errors of the path's folders (a folder swapped for a symlink that leads
    /// out is [`PathError::Outside`]), the errors of removing and creating, and `content`'s.
    pub fn restore_shape(
        &self,
        path: &str,
        shape: &Shape,
        content: &mut dyn FnMut(u64, u64, &mut dyn io::Write) -> io::Result<()>,
    ) -> Result<(), PathError> {
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
            Err(e) if e.kind() == io::ErrorKind::NotFound && *shape == Shape::Absent => {
                return Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.dir.create_dir_all(&parent).map_err(io)?;
                self.open_folder(&parent).map_err(io)?
            }
            Err(e) => return Err(io(e)),
        };
        match folder.symlink_metadata(leaf) {
            Ok(_) => tree::remove(&folder, leaf, path)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        write_shape(&folder, leaf, path, shape, content, 0)?;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))
    }
}

/// One walk of [`ProjectDir::shape`].
struct Walk<'v> {
    budget: Budget,
    /// The bytes of the files walked so far.
    at: u64,
    visit: Option<&'v mut dyn Visit>,
}

impl Walk<'_> {
    fn absent(&mut self, path: &str) -> Result<(), PathError> {
        match self.visit.as_mut() {
            Some(visit) => visit.absent().map_err(|e| from_io(path, e)),
            None => Ok(()),
        }
    }

    /// Walks the entry `name` of `folder` (never following it), with everything below it.
    fn node(
        &mut self,
        folder: BorrowedFd<'_>,
        name: &str,
        path: &str,
        depth: usize,
    ) -> Result<Shape, PathError> {
        let io = |e: Errno| from_io(path, e.into());
        let stat = match rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => {
                self.absent(path)?;
                return Ok(Shape::Absent);
            }
            Err(e) => return Err(io(e)),
        };
        let mode = stat.st_mode & KEPT_MODE_BITS;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {
                let size = u64::try_from(stat.st_size).unwrap_or(0);
                self.file(folder, name, path, mode, size)
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(folder, name, Vec::new()).map_err(io)?;
                let target = target
                    .into_string()
                    .map_err(|_| not_undoable(path, "a link whose target is not UTF-8"))?;
                self.budget.take(target.len() as u64, path)?;
                if let Some(visit) = self.visit.as_mut() {
                    visit.symlink(&target).map_err(|e| from_io(path, e))?;
                }
                Ok(Shape::Symlink { target })
            }
            FileType::Directory => self.folder(folder, name, path, mode, depth),
            _ => Err(not_undoable(path, "a FIFO, socket or device")),
        }
    }

    fn file(
        &mut self,
        folder: BorrowedFd<'_>,
        name: &str,
        path: &str,
        mode: u32,
        size: u64,
    ) -> Result<Shape, PathError> {
        let io = |e: Errno| from_io(path, e.into());
        let changed = || PathError::Changed {
            path: Shown::new(path),
        };
        let at = self.at;
        let Some(visit) = self.visit.as_mut() else {
            // Only its size is needed: nothing is opened.
            self.budget.take(size, path)?;
            self.at += size;
            return Ok(Shape::File { mode, size, at });
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd =
            rustix::fs::openat(folder, name, flags | OFlags::CLOEXEC, Mode::empty()).map_err(io)?;
        let opened = rustix::fs::fstat(&fd).map_err(io)?;
        if FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile {
            return Err(changed());
        }
        let size = u64::try_from(opened.st_size).unwrap_or(0);
        self.budget.take(size, path)?;
        let mut counted = Counted {
            inner: std::fs::File::from(fd).take(size),
            read: 0,
        };
        visit
            .file(mode, size, at, &mut counted)
            .map_err(|e| from_io(path, e))?;
        if counted.read != size {
            return Err(changed());
        }
        self.at += size;
        Ok(Shape::File { mode, size, at })
    }

    fn folder(
        &mut self,
        folder: BorrowedFd<'_>,
        name: &str,
        path: &str,
        mode: u32,
        depth: usize,
    ) -> Result<Shape, PathError> {
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
        names.sort();
        if let Some(visit) = self.visit.as_mut() {
            visit
                .folder(mode, names.len())
                .map_err(|e| from_io(path, e))?;
        }
        let mut entries = BTreeMap::new();
        for entry_name in names {
            let below = format!("{path}/{entry_name}");
            if let Some(visit) = self.visit.as_mut() {
                visit.entry(&entry_name).map_err(|e| from_io(path, e))?;
            }
            let shape = self.node(handle.as_fd(), &entry_name, &below, depth + 1)?;
            entries.insert(entry_name, shape);
        }
        Ok(Shape::Folder { mode, entries })
    }
}

/// A reader that counts what was read through it.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Creates `shape` as the entry `name` of `folder` (nothing stands there).
fn write_shape(
    folder: &impl AsFd,
    name: &str,
    path: &str,
    shape: &Shape,
    content: &mut dyn FnMut(u64, u64, &mut dyn io::Write) -> io::Result<()>,
    depth: usize,
) -> Result<(), PathError> {
    let folder = folder.as_fd();
    let io = |e: Errno| from_io(path, e.into());
    match shape {
        Shape::Absent => Ok(()),
        Shape::File { mode, size, at } => {
            let dir = Dir::from_std_file(std::fs::File::from(
                rustix::io::fcntl_dupfd_cloexec(folder, 0).map_err(io)?,
            ));
            create_new_file_from(&dir, name, path, &mut |file| content(*at, *size, file))?;
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(folder, name, flags, Mode::empty()).map_err(io)?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & KEPT_MODE_BITS)).map_err(io)?;
            rustix::fs::fsync(&fd).map_err(io)
        }
        Shape::Symlink { target } => {
            rustix::fs::symlinkat(target.as_str(), folder, name).map_err(io)
        }
        Shape::Folder { mode, entries } => {
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
                write_shape(&handle, entry_name, &below, entry, content, depth + 1)?;
            }
            rustix::fs::fchmod(&handle, Mode::from_raw_mode(mode & KEPT_MODE_BITS)).map_err(io)?;
            rustix::fs::fsync(&handle).map_err(io)
        }
    }
}

/// How many folders deep a snapshot or a restore goes.
const MAX_DEPTH: usize = tree::MAX_DELETE_DEPTH;

/// What is left of a snapshot's byte limit.
struct Budget {
    left: u64,
    max: u64,
}

impl Budget {
    fn take(&mut self, bytes: u64, path: &str) -> Result<(), PathError> {
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
fn open_folder_nofollow(folder: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, Errno> {
    let name = CString::new(name).map_err(|_| Errno::INVAL)?;
    rustix::fs::openat(folder, &name, super::tree::FOLDER_NOFOLLOW, Mode::empty())
}

fn not_undoable(path: &str, what: &'static str) -> PathError {
    PathError::NotUndoable {
        path: Shown::new(path),
        what,
    }
}
