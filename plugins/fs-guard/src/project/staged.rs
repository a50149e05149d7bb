//! [`StagedWrite`]: a file written in pieces (an upload that streams in), through the same
//! confinement and durability as [`ProjectDir::write_bytes`]: the pieces go to a fresh
//! temporary file beneath the root (`O_EXCL`, in the destination folder when it exists, else
//! in the root), which is synced and renamed onto its name only by [`StagedWrite::commit`].
//! Until then the name is untouched, and a staged write that is dropped (a failure, a client
//! gone, a limit crossed) removes its temporary file: nothing is ever half-written.

use std::io::Write;

use cap_std::fs::Dir;
use rustix::fs::{AtFlags, RenameFlags};

use super::atomic_write::{temp_file, VersionCheck};
use super::{move_fallback, IfExists, ProjectDir, Written};
use crate::error::{from_io, Current, PathError, Shown};
use crate::path::{check_path, PathUse, Split};

/// A file being written piece by piece; see the module documentation. Made by
/// [`ProjectDir::stage_write`].
#[derive(Debug)]
pub struct StagedWrite {
    /// The project root, for the folders the commit may create.
    root: ProjectDir,
    /// The model's path.
    path: String,
    /// The folder holding the destination, as the path names it (`.` for the root).
    parent: String,
    /// The destination's name in `parent`.
    leaf: String,
    /// The folder holding the temporary file (the destination's, or the root).
    staging: Dir,
    /// Whether `staging` is the destination's folder.
    in_place: bool,
    temp_name: String,
    file: cap_std::fs::File,
    if_exists: IfExists,
    written: u64,
    /// Whether the temporary file is gone (renamed onto the name, or removed).
    finished: bool,
}

impl ProjectDir {
    /// Starts writing `path` in pieces ([`StagedWrite::write`], then
    /// [`StagedWrite::commit`]), bounded by `max_write_bytes` in all. What can be known
    /// before a byte is written is refused now: a path that is not a new file's, a folder,
    /// link or special file at the name, and with [`IfExists::Refuse`] a file at the name.
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::write_bytes`], and the errors of creating the temporary file.
    pub fn stage_write(&self, path: &str, if_exists: IfExists) -> Result<StagedWrite, PathError> {
        let rel = check_path(path, PathUse::Create)?;
        let (parent, leaf) = match rel.split() {
            Split::Named { parent, leaf } => (parent, leaf.to_owned()),
            Split::Root | Split::NotAName => return Err(self.not_a_file_name(path)),
        };
        let io = |e| from_io(path, e);
        let (staging, in_place) = match self.open_folder(&parent) {
            Ok(folder) => {
                let existing = self.existing_file_permissions(&folder, &leaf, path)?;
                if existing.is_some() && if_exists == IfExists::Refuse {
                    return Err(PathError::AlreadyExists {
                        path: Shown::new(path),
                    });
                }
                (folder, true)
            }
            // Missing: the commit creates it, or says why it cannot. The pieces wait in the
            // root meanwhile, so a failed upload creates no folder.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (self.open_folder(".").map_err(io)?, false)
            }
            // A file on the way, a link that leads out: refused before a byte comes.
            Err(e) => return Err(io(e)),
        };
        let (temp_name, file) = temp_file(&staging).map_err(io)?;
        Ok(StagedWrite {
            root: ProjectDir {
                dir: self.dir.try_clone().map_err(io)?,
                limits: self.limits,
                create_only: self.create_only.clone(),
            },
            path: path.to_owned(),
            parent,
            leaf,
            staging,
            in_place,
            temp_name,
            file,
            if_exists,
            written: 0,
            finished: false,
        })
    }
}

impl StagedWrite {
    /// Appends `bytes` to the staged content.
    ///
    /// # Errors
    ///
    /// [`PathError::TextTooLarge`] when the content would pass `max_write_bytes` (nothing of
    /// `bytes` is written), and I/O errors.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), PathError> {
        let limit = self.root.limits.max_write_bytes;
        let size = self.written.saturating_add(bytes.len() as u64);
        if size > limit {
            return Err(PathError::TextTooLarge { size, limit });
        }
        self.file
            .write_all(bytes)
            .map_err(|e| from_io(&self.path, e))?;
        self.written = size;
        Ok(())
    }

    /// How many bytes were written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Syncs the staged content and renames it onto its name as its [`IfExists`] says
    /// (creating missing parent folders), then syncs the folders. An existing file that is
    /// replaced keeps its mode (without setuid, setgid and sticky).
    ///
    /// # Errors
    ///
    /// As [`ProjectDir::write_bytes`]: [`PathError::AlreadyExists`] with
    /// [`IfExists::Refuse`] for a file at the name (even one created meanwhile),
    /// [`PathError::Stale`] for [`IfExists::ReplaceIfVersion`], and the errors of the
    /// parent folders. On every error the temporary file is removed.
    pub fn commit(mut self) -> Result<Written, PathError> {
        let path = self.path.clone();
        let io = |e| from_io(&path, e);
        self.file.sync_all().map_err(io)?;
        let folder = if self.in_place {
            self.staging.try_clone().map_err(io)?
        } else {
            if let IfExists::ReplaceIfVersion(expected) = self.if_exists {
                // Only an existing file can have the expected version: nothing is created.
                return Err(PathError::Stale {
                    path: Shown::new(&path),
                    expected,
                    current: Current::Gone,
                });
            }
            self.root.create_parents(&path, &self.parent)?;
            self.root.open_folder(&self.parent).map_err(io)?
        };
        let permissions = self
            .root
            .existing_file_permissions(&folder, &self.leaf, &path)?;
        let replaced = permissions.is_some();
        match self.if_exists {
            IfExists::Refuse => self.rename_new(&folder)?,
            IfExists::Replace => self.rename_over(&folder, permissions, None)?,
            IfExists::ReplaceIfVersion(expected) => {
                if !replaced {
                    return Err(PathError::Stale {
                        path: Shown::new(&path),
                        expected,
                        current: Current::Gone,
                    });
                }
                let check = VersionCheck {
                    expected,
                    read_limit: self.root.limits.max_read_bytes,
                };
                self.rename_over(&folder, permissions, Some(check))?;
            }
        }
        self.finished = true;
        rustix::fs::fsync(&folder).map_err(|e| io(e.into()))?;
        if !self.in_place {
            rustix::fs::fsync(&self.staging).map_err(|e| io(e.into()))?;
        }
        Ok(Written { replaced })
    }

    /// Moves the temporary file onto the name with `RENAME_NOREPLACE` (or a hard link where
    /// the file system refuses the flag): a file at the name is never replaced.
    fn rename_new(&self, folder: &Dir) -> Result<(), PathError> {
        let moved = match rustix::fs::renameat_with(
            &self.staging,
            &self.temp_name,
            folder,
            &self.leaf,
            RenameFlags::NOREPLACE,
        ) {
            Err(rustix::io::Errno::INVAL) => {
                move_fallback::link_then_unlink(&self.staging, &self.temp_name, folder, &self.leaf)
            }
            moved => moved,
        };
        moved.map_err(|errno| match errno {
            rustix::io::Errno::EXIST => PathError::AlreadyExists {
                path: Shown::new(&self.path),
            },
            other => from_io(&self.path, other.into()),
        })
    }

    /// Gives the temporary file the replaced file's `permissions`, checks the version
    /// (`check`), and renames it onto the name.
    fn rename_over(
        &self,
        folder: &Dir,
        permissions: Option<cap_std::fs::Permissions>,
        check: Option<VersionCheck>,
    ) -> Result<(), PathError> {
        let io = |e| from_io(&self.path, e);
        if let Some(permissions) = permissions {
            self.file.set_permissions(permissions).map_err(io)?;
        }
        if let Some(check) = check {
            check.verify(folder, &self.leaf, &self.path)?;
        }
        rustix::fs::renameat(&self.staging, &self.temp_name, folder, &self.leaf)
            .map_err(|e| io(e.into()))
    }
}

impl Drop for StagedWrite {
    fn drop(&mut self) {
        if !self.finished {
            let _ = rustix::fs::unlinkat(&self.staging, &self.temp_name, AtFlags::empty());
        }
    }
}
