//! The reading half of [`ProjectDir`]: what a path is (`meta`), a file's text (`read_text`)
//! or bytes (`read_bytes`) and a folder's entries (`list`). Nothing here changes the project.

use std::io::Read;

use cap_std::fs::{OpenOptions, OpenOptionsExt};
use rustix::fs::OFlags;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{
    entry_type, regular_size, special, EntryType, FirstNames, ListEntry, Listing, PathMeta,
    ProjectDir,
};
use crate::error::{from_io, PathError, Shown};
use crate::path::{check_path, PathUse};

/// A regular file open for reading, from [`ProjectDir::open_file`].
#[derive(Debug)]
pub struct OpenedFile {
    /// The open file.
    pub file: cap_std::fs::File,
    /// Its size when it was opened, at most [`OpenedFile::limit`].
    pub size: u64,
    /// `max_read_bytes`: a reader stops here, and fails past it.
    pub limit: u64,
}

impl ProjectDir {
    /// Type, size and modification time of a file or folder, following in-root symlinks.
    ///
    /// # Errors
    ///
    /// Anything that is not a regular file or a folder is refused, saying what it is.
    pub fn meta(&self, path: &str) -> Result<PathMeta, PathError> {
        check_path(path, PathUse::Existing)?;
        let meta = self.dir.metadata(path).map_err(|e| from_io(path, e))?;
        let kind = entry_type(&meta).ok_or_else(|| special(path, &meta))?;
        let modified = meta.modified().map_err(|e| from_io(path, e))?.into_std();
        let modified = OffsetDateTime::from(modified)
            .replace_nanosecond(0)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
            .format(&Rfc3339)
            .map_err(|e| PathError::Io {
                path: Shown::new(path),
                kind: std::io::ErrorKind::InvalidData,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?;
        Ok(PathMeta {
            kind,
            size: meta.len(),
            modified_at: modified,
        })
    }

    /// The UTF-8 text of a regular file, verbatim. Special files are never opened in the
    /// common case (a `stat` first), and never block when a race swaps one in (the open is
    /// `O_NONBLOCK | O_NOCTTY`, then `fstat` decides). At most `max_read_bytes` are read,
    /// even from a file that grows.
    ///
    /// # Errors
    ///
    /// Too large (size and limit named), NUL bytes (binary or UTF-16), invalid UTF-8 (byte
    /// offset named), not a regular file, and the resolution errors.
    pub fn read_text(&self, path: &str) -> Result<String, PathError> {
        let bytes = self.read_bytes(path)?;
        if let Some(offset) = bytes.iter().position(|&b| b == 0) {
            return Err(PathError::Binary {
                path: Shown::new(path),
                offset,
            });
        }
        String::from_utf8(bytes).map_err(|e| PathError::NotUtf8 {
            path: Shown::new(path),
            offset: e.utf8_error().valid_up_to(),
        })
    }

    /// The bytes of a regular file, whatever they hold (for a download), opened and bounded
    /// as [`ProjectDir::read_text`] does: at most `max_read_bytes`, even from a file that
    /// grows.
    ///
    /// # Errors
    ///
    /// Too large (size and limit named), grew past the limit, not a regular file, and the
    /// resolution errors.
    pub fn read_bytes(&self, path: &str) -> Result<Vec<u8>, PathError> {
        let opened = self.open_file(path)?;
        let limit = self.limits.max_read_bytes;
        let capacity = usize::try_from(opened.size).unwrap_or(0);
        let mut bytes = Vec::with_capacity(capacity);
        opened
            .file
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| from_io(path, e))?;
        if bytes.len() as u64 > limit {
            return Err(PathError::FileGrew {
                path: Shown::new(path),
                limit,
            });
        }
        Ok(bytes)
    }

    /// A regular file opened for reading in pieces (a download that streams out), opened and
    /// checked as [`ProjectDir::read_bytes`] does: never a special file, never blocking, its
    /// size at most `max_read_bytes` when opened. The reader must still stop at
    /// `max_read_bytes` ([`OpenedFile::limit`]) if the file grows.
    ///
    /// # Errors
    ///
    /// Too large (size and limit named), not a regular file, and the resolution errors.
    pub fn open_file(&self, path: &str) -> Result<OpenedFile, PathError> {
        check_path(path, PathUse::Existing)?;
        let io = |e| from_io(path, e);
        let limit = self.limits.max_read_bytes;
        let before = self.dir.metadata(path).map_err(io)?;
        regular_size(path, &before, limit)?;

        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
        let file = self.dir.open_with(path, &options).map_err(io)?;
        let size = regular_size(path, &file.metadata().map_err(io)?, limit)?;
        Ok(OpenedFile { file, size, limit })
    }

    /// The entries of a folder (in-root symlinks followed), sorted by name, at most
    /// `max_list_entries`. Symlinks that lead outside, dangle or loop, FIFOs, sockets and
    /// devices are left out and never opened; so are names that are not UTF-8. However many
    /// entries the folder has, at most `max_list_entries` are held in memory at once (a
    /// bounded heap); the others are only counted.
    ///
    /// # Errors
    ///
    /// Not a folder, and the resolution errors.
    pub fn list(&self, path: &str) -> Result<Listing, PathError> {
        check_path(path, PathUse::Existing)?;
        let io = |e| from_io(path, e);
        let max = usize::try_from(self.limits.max_list_entries).unwrap_or(usize::MAX);
        let mut first = FirstNames::new(max);
        for entry in self.dir.read_dir(path).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let file_type = entry.file_type().map_err(io)?;
            let kind = if file_type.is_file() {
                Some(EntryType::File)
            } else if file_type.is_dir() {
                Some(EntryType::Directory)
            } else if file_type.is_symlink() {
                // Resolved from the root, not from the listed folder, so a relative link
                // such as `../x` that stays inside the project is still followed.
                let target = format!("{}/{}", path.trim_end_matches('/'), name);
                self.dir.metadata(&target).ok().and_then(|m| entry_type(&m))
            } else {
                None
            };
            if let Some(kind) = kind {
                first.offer(ListEntry {
                    name,
                    kind,
                    symlink: file_type.is_symlink(),
                });
            }
        }
        let (entries, total) = first.finish();
        Ok(Listing { entries, total })
    }
}
