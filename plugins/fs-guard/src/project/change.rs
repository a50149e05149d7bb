//! The changing half of [`ProjectDir`]: writes, new folders, deletions and moves. Each acts
//! on the last name through an open handle of its parent folder, so a swapped path component
//! cannot redirect it; a recursive delete walks down by handles opened with `O_NOFOLLOW`
//! (`tree`). What stands at a name before a change is `change_target`'s to find; writing a
//! file whole is `atomic_write`'s.

use rustix::fs::RenameFlags;

use super::atomic_write::{create_new_file, replace_file, VersionCheck};
use super::{move_fallback, not_a_folder, tree, IfExists, ProjectDir, Written};
use crate::error::{from_io, Current, PathError, Shown};
use crate::path::{check_path, Entry, PathUse, Split};
use crate::ContentVersion;

impl ProjectDir {
    /// Replaces or creates a file with `text`, creating missing parent folders: written to a
    /// temporary file in the same folder, synced, given the old file's mode (without setuid,
    /// setgid and sticky: the mode keeps only `0o777`), renamed onto the
    /// name, and the folder synced. Nothing is ever half-written, and a hard link's other
    /// names keep the old content.
    ///
    /// # Errors
    ///
    /// Text over `max_write_bytes`; an existing folder, FIFO, socket, device or symlink at
    /// the name (an in-root symlink's target is named so the model can write there).
    pub fn write_text(&self, path: &str, text: &str) -> Result<(), PathError> {
        self.write_bytes(path, text.as_bytes(), IfExists::Replace)
            .map(|_| ())
    }

    /// Writes `bytes` (any content: an upload) to a file as [`ProjectDir::write_text`] does,
    /// creating missing parent folders, atomically and synced. With [`IfExists::Replace`] an
    /// existing file is replaced (keeping its mode); with [`IfExists::Refuse`] the new file
    /// is written under a temporary name and moved onto the name with
    /// `renameat2(RENAME_NOREPLACE)` (a hard link where the file system refuses the flag),
    /// so a file that exists, even one created a moment before, is never replaced. A path
    /// of the call's `create_only` ([`rojos_plugin_api::CallContext::create_only`]) is
    /// written as with [`IfExists::Refuse`] whatever `if_exists` says, refused with
    /// [`PathError::Appeared`].
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::write_text`] (`max_write_bytes` bounds `bytes`); with
    /// [`IfExists::Refuse`], [`PathError::AlreadyExists`] for a file at the name;
    /// [`PathError::Appeared`] for one at a `create_only` path.
    pub fn write_bytes(
        &self,
        path: &str,
        bytes: &[u8],
        if_exists: IfExists,
    ) -> Result<Written, PathError> {
        let rel = check_path(path, PathUse::Create)?;
        let limit = self.limits.max_write_bytes;
        if bytes.len() as u64 > limit {
            return Err(PathError::TextTooLarge {
                size: bytes.len() as u64,
                limit,
            });
        }
        let (parent, leaf) = match rel.split() {
            Split::Named { parent, leaf } => (parent, leaf),
            Split::Root | Split::NotAName => return Err(self.not_a_file_name(path)),
        };
        let io = |e| from_io(path, e);
        if let IfExists::ReplaceIfVersion(expected) = if_exists {
            // Only an existing file can have the expected version: nothing is created.
            return self.replace_if_version(path, &parent, leaf, bytes, expected);
        }
        // Most writes go to a folder that exists: opened at once. Anything else (missing, not
        // a folder) takes the creating path, which gives the same errors as always.
        let folder = match self.open_folder(&parent) {
            Ok(folder) => folder,
            Err(_) => {
                self.create_parents(path, &parent)?;
                self.open_folder(&parent).map_err(io)?
            }
        };
        let permissions = self.existing_file_permissions(&folder, leaf, path)?;
        let replaced = permissions.is_some();
        if if_exists == IfExists::Replace && self.create_only(path) {
            // The host let this call run unasked because nothing stood here: a file made
            // since is not replaced (nor one made between this look and the rename).
            let appeared = || PathError::Appeared {
                path: Shown::new(path),
            };
            if replaced {
                return Err(appeared());
            }
            create_new_file(&folder, leaf, path, bytes).map_err(|e| match e {
                PathError::AlreadyExists { .. } => appeared(),
                e => e,
            })?;
        } else if if_exists == IfExists::Refuse {
            if replaced {
                return Err(PathError::AlreadyExists {
                    path: Shown::new(path),
                });
            }
            create_new_file(&folder, leaf, path, bytes)?;
        } else {
            replace_file(&folder, leaf, path, bytes, permissions, None)?;
        }
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))?;
        Ok(Written { replaced })
    }

    /// Creates the folder `parent` of `path` and its missing parents, for a write.
    pub(super) fn create_parents(&self, path: &str, parent: &str) -> Result<(), PathError> {
        self.dir.create_dir_all(parent).map_err(|e| {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return from_io(path, e);
            }
            // Something that is not a folder stands on the way: say whether it leads out.
            match self.dir.metadata(parent) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => from_io(path, e),
                _ => PathError::NotADirectory {
                    path: Shown::new(path),
                },
            }
        })
    }

    /// [`IfExists::ReplaceIfVersion`]: replaces the file at `parent`/`leaf` only if it still
    /// holds content of version `expected`. The new file is written and synced first, so the
    /// comparison and the rename follow each other as closely as they can; a missing folder
    /// or file means the file is gone.
    fn replace_if_version(
        &self,
        path: &str,
        parent: &str,
        leaf: &str,
        bytes: &[u8],
        expected: ContentVersion,
    ) -> Result<Written, PathError> {
        let io = |e| from_io(path, e);
        let gone = || PathError::Stale {
            path: Shown::new(path),
            expected,
            current: Current::Gone,
        };
        let folder = match self.open_folder(parent) {
            Ok(folder) => folder,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(gone()),
            Err(e) => return Err(io(e)),
        };
        let Some(permissions) = self.existing_file_permissions(&folder, leaf, path)? else {
            return Err(gone());
        };
        let check = VersionCheck {
            expected,
            read_limit: self.limits.max_read_bytes,
        };
        replace_file(&folder, leaf, path, bytes, Some(permissions), Some(check))?;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))?;
        Ok(Written { replaced: true })
    }

    /// Creates a folder and its missing parents; an existing folder (or in-root symlink to
    /// one) is fine.
    ///
    /// # Errors
    ///
    /// An existing non-folder at the name, or a symlink that leads nowhere in the project.
    pub fn create_dir(&self, path: &str) -> Result<(), PathError> {
        check_path(path, PathUse::Create)?;
        // A folder that exists already (the usual case) needs no creating.
        if self.dir.metadata(path).is_ok_and(|meta| meta.is_dir()) {
            return Ok(());
        }
        match self.dir.create_dir_all(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(from_io(path, e)),
        }
        match self.dir.metadata(path) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(PathError::ExistsNotAFolder {
                path: Shown::new(path),
            }),
            Err(e) => {
                let is_link = self
                    .dir
                    .symlink_metadata(path)
                    .is_ok_and(|m| m.file_type().is_symlink());
                Err(match from_io(path, e) {
                    PathError::NotFound { path } | PathError::Loop { path } if is_link => {
                        PathError::SymlinkElsewhere { path }
                    }
                    other => other,
                })
            }
        }
    }

    /// Removes a file, a symlink (the link itself, never its target) or a special file (a
    /// FIFO or device is never opened), with one `unlinkat` on its parent folder's handle;
    /// then syncs that folder. Folders are refused (the kernel refuses them in the same
    /// call): see [`ProjectDir::delete_recursive`].
    ///
    /// # Errors
    ///
    /// A folder ([`PathError::IsADirectory`]); the root itself, also as `a/..`
    /// ([`PathError::Root`]); a path ending in `.` or `..` ([`PathError::NotAnEntry`]); a
    /// trailing `/` on something that is not a folder; and the resolution errors of the
    /// parent folder (a symlink on the way that leads out is [`PathError::Outside`]).
    pub fn delete(&self, path: &str) -> Result<(), PathError> {
        let (folder, leaf, dir_only) = self.entry_to_change(path, "deleted")?;
        let io = |e| from_io(path, e);
        if dir_only {
            // `x/` names a folder, which this never deletes: say which refusal applies.
            let meta = folder.symlink_metadata(leaf).map_err(io)?;
            return Err(if meta.is_dir() {
                PathError::IsADirectory {
                    path: Shown::new(path),
                }
            } else {
                not_a_folder(path, &meta)
            });
        }
        rustix::fs::unlinkat(&folder, leaf, rustix::fs::AtFlags::empty())
            .map_err(|e| io(e.into()))?;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))
    }

    /// Removes a file, symlink or special file like [`ProjectDir::delete`], or a folder with
    /// everything in it; then syncs the parent folder. Never follows a symlink: a link inside
    /// the tree is removed as a link, and a folder swapped for a link while the delete runs
    /// is found as the link (`O_NOFOLLOW`) and only the link is removed, so nothing outside
    /// the root is ever touched. Does not descend into other file systems mounted inside.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::delete`] (except that folders are deleted); a trailing `/` on a
    /// symlink (name the link without it); a mount point ([`PathError::MountPoint`]); folders
    /// nested deeper than [`MAX_DELETE_DEPTH`](crate::MAX_DELETE_DEPTH); a tree that kept changing
    /// ([`PathError::Changed`]); an entry that cannot be removed (named by its path). A
    /// failure partway leaves the rest in place.
    pub fn delete_recursive(&self, path: &str) -> Result<(), PathError> {
        let (folder, leaf, dir_only) = self.entry_to_change(path, "deleted")?;
        let io = |e| from_io(path, e);
        if dir_only {
            let meta = folder.symlink_metadata(leaf).map_err(io)?;
            if !meta.is_dir() {
                return Err(not_a_folder(path, &meta));
            }
        }
        tree::remove(&folder, leaf, path.trim_end_matches('/'))?;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))
    }

    /// Moves `from` to `to` (both relative to the root) with `renameat2(RENAME_NOREPLACE)`
    /// between the two parent folders' handles: no check-then-act, an existing destination is
    /// never replaced (a file, a folder, even an empty one, or a link), a symlink is moved as
    /// a link. Where the file system refuses the flag (NFS), `move_fallback` moves without
    /// it, still never replacing anything that holds data. The destination's folder must exist. A trailing `/` on either path says the
    /// source must be a folder. Both folders are synced afterwards.
    ///
    /// # Errors
    ///
    /// The root itself as source, also as `a/..` ([`PathError::Root`]); a path ending in `.`
    /// or `..`; an existing destination ([`PathError::DestinationExists`], which says how to
    /// move into it when it is a folder); a missing destination folder
    /// ([`PathError::NoDestinationFolder`]); a folder moved into itself
    /// ([`PathError::IntoItself`]); the resolution errors of both parent folders.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), PathError> {
        let from_rel = check_path(from, PathUse::Existing)?;
        let to_rel = check_path(to, PathUse::Create)?;
        let (from_parent, from_leaf, from_dir_only) = match from_rel.entry() {
            Entry::Named {
                parent,
                leaf,
                dir_only,
            } => (parent, leaf, dir_only),
            Entry::Root => return Err(PathError::Root { action: "moved" }),
            Entry::Dotted => return Err(self.dotted(from, "moved")),
        };
        let exists = |into: String| PathError::DestinationExists {
            path: Shown::new(to),
            into_folder: Some(Shown::new(&into)),
        };
        let (to_parent, to_leaf, to_dir_only) = match to_rel.entry() {
            Entry::Named {
                parent,
                leaf,
                dir_only,
            } => (parent, leaf, dir_only),
            Entry::Root => return Err(exists(from_leaf.to_owned())),
            Entry::Dotted => {
                return Err(match self.open_folder(to) {
                    Ok(folder) if self.is_root(&folder) => exists(from_leaf.to_owned()),
                    Ok(_) => PathError::NotAnEntry {
                        path: Shown::new(to),
                    },
                    Err(e) => from_io(to, e),
                })
            }
        };
        let from_folder = self
            .open_folder(&from_parent)
            .map_err(|e| from_io(from, e))?;
        // Only to blame the right path and word the refusals: the move itself checks nothing
        // in advance, the kernel decides in the one renameat2 call.
        let source = from_folder
            .symlink_metadata(from_leaf)
            .map_err(|e| from_io(from, e))?;
        if from_dir_only && !source.is_dir() {
            return Err(not_a_folder(from, &source));
        }
        if to_dir_only && !source.is_dir() {
            return Err(PathError::NamesAFolder {
                path: Shown::new(to),
            });
        }
        let to_folder = self
            .open_folder(&to_parent)
            .map_err(|e| match from_io(to, e) {
                PathError::NotFound { path } => PathError::NoDestinationFolder {
                    path,
                    folder: Shown::new(&to_parent),
                },
                other => other,
            })?;
        let moved = match rustix::fs::renameat_with(
            &from_folder,
            from_leaf,
            &to_folder,
            to_leaf,
            RenameFlags::NOREPLACE,
        ) {
            // The file system refuses the flag itself (NFS): a move that still never
            // replaces (see `move_fallback`). For a folder, EINVAL may instead mean it was
            // being moved into itself, which the fallback's own rename is refused for again.
            Err(rustix::io::Errno::INVAL) if source.is_dir() => {
                move_fallback::rename_if_free(&from_folder, from_leaf, &to_folder, to_leaf)
            }
            Err(rustix::io::Errno::INVAL) => {
                move_fallback::link_then_unlink(&from_folder, from_leaf, &to_folder, to_leaf)
            }
            moved => moved,
        };
        moved.map_err(|errno| match errno {
            rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY => {
                let is_folder = to_folder
                    .symlink_metadata(to_leaf)
                    .is_ok_and(|meta| meta.is_dir());
                PathError::DestinationExists {
                    path: Shown::new(to),
                    into_folder: is_folder
                        .then(|| Shown::new(&format!("{}/{from_leaf}", to.trim_end_matches('/')))),
                }
            }
            // EINVAL for a folder, with or without RENAME_NOREPLACE: "a folder cannot be
            // made a subfolder of itself".
            rustix::io::Errno::INVAL if source.is_dir() => PathError::IntoItself {
                from: Shown::new(from),
                to: Shown::new(to),
            },
            rustix::io::Errno::XDEV => PathError::Io {
                path: Shown::new(to),
                kind: std::io::ErrorKind::CrossesDevices,
                source: errno.into(),
            },
            other => from_io(from, other.into()),
        })?;
        rustix::fs::fsync(&to_folder).map_err(|e| from_io(to, e.into()))?;
        rustix::fs::fsync(&from_folder).map_err(|e| from_io(from, e.into()))
    }
}
