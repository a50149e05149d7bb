//! Before a change: the open parent folder a delete or move acts through, what stands at a
//! name before a write (the mode of a file to keep), and the refusals when it is not what the
//! change needs (the root, a name ending in `.` or `..` or `/`, a folder, a symlink).

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, Permissions, PermissionsExt};
use rustix::fs::OFlags;

use super::{special, ProjectDir, KEPT_MODE_BITS};
use crate::error::{from_io, PathError, Shown};
use crate::path::{check_path, Entry, PathUse};

impl ProjectDir {
    /// For a delete: the open parent folder of the entry `path` names, the entry's name, and
    /// whether the path ended in `/`. Refuses the root and paths ending in `.` or `..`.
    pub(super) fn entry_to_change<'p>(
        &self,
        path: &'p str,
        action: &'static str,
    ) -> Result<(Dir, &'p str, bool), PathError> {
        let rel = check_path(path, PathUse::Existing)?;
        match rel.entry() {
            Entry::Named {
                parent,
                leaf,
                dir_only,
            } => {
                let folder = self.open_folder(&parent).map_err(|e| from_io(path, e))?;
                Ok((folder, leaf, dir_only))
            }
            Entry::Root => Err(PathError::Root { action }),
            Entry::Dotted => Err(self.dotted(path, action)),
        }
    }

    /// The refusal for a move or delete of a path ending in `.` or `..`: the root's own
    /// refusal if it resolves to the root, else that it names no entry (or why it does not
    /// resolve at all, e.g. `..` leads outside).
    pub(super) fn dotted(&self, path: &str, action: &'static str) -> PathError {
        match self.open_folder(path) {
            Ok(folder) if self.is_root(&folder) => PathError::Root { action },
            Ok(_) => PathError::NotAnEntry {
                path: Shown::new(path),
            },
            Err(e) => from_io(path, e),
        }
    }

    /// Whether `folder` is the project root (same device and inode).
    pub(super) fn is_root(&self, folder: &Dir) -> bool {
        match (rustix::fs::fstat(&self.dir), rustix::fs::fstat(folder)) {
            (Ok(root), Ok(other)) => root.st_dev == other.st_dev && root.st_ino == other.st_ino,
            _ => false,
        }
    }

    /// Opens a folder for reading (not `O_PATH`, so it can be synced), beneath the root.
    pub(super) fn open_folder(&self, path: &str) -> std::io::Result<Dir> {
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags((OFlags::DIRECTORY | OFlags::NONBLOCK).bits() as i32);
        let file = self.dir.open_with(path, &options)?;
        Ok(Dir::from_std_file(file.into_std()))
    }

    /// What stands at `leaf` before a write: `None` if nothing, the mode of a regular file to
    /// keep (its [`KEPT_MODE_BITS`]), or the refusal for anything else (including any symlink).
    pub(super) fn existing_file_permissions(
        &self,
        folder: &Dir,
        leaf: &str,
        path: &str,
    ) -> Result<Option<Permissions>, PathError> {
        let meta = match folder.symlink_metadata(leaf) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(from_io(path, e)),
        };
        let file_type = meta.file_type();
        if file_type.is_file() {
            let mode = meta.permissions().mode() & KEPT_MODE_BITS;
            Ok(Some(Permissions::from_mode(mode)))
        } else if file_type.is_dir() {
            Err(PathError::IsADirectory {
                path: Shown::new(path),
            })
        } else if file_type.is_symlink() {
            Err(self.symlink_refusal(path))
        } else {
            Err(special(path, &meta))
        }
    }

    /// A write named an existing symlink: name its in-root target, or say it leads nowhere
    /// in the project (without saying where).
    pub(super) fn symlink_refusal(&self, path: &str) -> PathError {
        let target = self.dir.canonicalize(path).ok().and_then(|target| {
            let target = target.to_str()?.to_owned();
            Some(if target.is_empty() {
                ".".to_owned()
            } else {
                target
            })
        });
        match target {
            Some(target) => PathError::SymlinkInside {
                path: Shown::new(path),
                target: Shown::new(&target),
            },
            None => PathError::SymlinkElsewhere {
                path: Shown::new(path),
            },
        }
    }

    /// The error for a write or delete whose path ends in `/`, `.` or `..`: what it resolves
    /// to if that fails, else that it names a folder.
    pub(super) fn not_a_file_name(&self, path: &str) -> PathError {
        match self.dir.metadata(path) {
            Ok(meta) if !meta.is_dir() => PathError::NotADirectory {
                path: Shown::new(path),
            },
            Ok(_) => PathError::NamesAFolder {
                path: Shown::new(path),
            },
            Err(e) => match from_io(path, e) {
                PathError::NotFound { path } => PathError::NamesAFolder { path },
                other => other,
            },
        }
    }
}
