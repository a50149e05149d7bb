//! Files written whole: into a temporary file of the same folder (`O_EXCL`), synced, then
//! renamed onto the name ([`replace_file`], after a [`VersionCheck`] if one is asked) or moved
//! there with `RENAME_NOREPLACE` so that no file is ever replaced ([`create_new_file`]). The
//! temporary name is removed on every failure, and nothing is ever half-written.

use std::io::{Read, Write};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, Permissions};
use rustix::fs::{OFlags, RenameFlags};

use super::{move_fallback, special};
use crate::error::{from_io, Current, PathError, Shown};
use crate::ContentVersion;

/// How many temporary names [`create_new_file`] tries before it gives up.
const TEMP_NAME_ATTEMPTS: u32 = 16;

/// A version a replacement must still find at its name, and how much of the current file
/// may be read to compare it.
#[derive(Debug, Clone, Copy)]
pub(super) struct VersionCheck {
    pub(super) expected: ContentVersion,
    pub(super) read_limit: u64,
}

impl VersionCheck {
    /// Compares the content at `folder`/`leaf` (opened without following a symlink and
    /// without blocking on a FIFO swapped in) with the expected version.
    pub(super) fn verify(self, folder: &Dir, leaf: &str, path: &str) -> Result<(), PathError> {
        let stale = |current| PathError::Stale {
            path: Shown::new(path),
            expected: self.expected,
            current,
        };
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32);
        let file = match folder.open_with(leaf, &options) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(stale(Current::Gone)),
            Err(e) => return Err(from_io(path, e)),
        };
        let meta = file.metadata().map_err(|e| from_io(path, e))?;
        if !meta.is_file() {
            return Err(special(path, &meta));
        }
        if meta.len() > self.read_limit {
            return Err(stale(Current::OverReadLimit));
        }
        let current = ContentVersion::of_reader(file.take(self.read_limit.saturating_add(1)))
            .map_err(|e| from_io(path, e))?;
        if current == self.expected {
            Ok(())
        } else {
            Err(stale(Current::Version(current)))
        }
    }
}

/// Writes `bytes` to a temporary file in `folder` (a named one, `O_EXCL`: linking an unnamed
/// `O_TMPFILE` into place goes through `/proc`, which a sandboxed plugin worker cannot
/// reach), syncs it, gives it `permissions`, and renames it onto `leaf`, after `check` (if
/// any) found the expected content there. The temporary file is removed on every failure.
pub(super) fn replace_file(
    folder: &Dir,
    leaf: &str,
    path: &str,
    bytes: &[u8],
    permissions: Option<Permissions>,
    check: Option<VersionCheck>,
) -> Result<(), PathError> {
    let io = |e| from_io(path, e);
    let (temp_name, mut file) = temp_file(folder).map_err(io)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| match permissions {
            Some(permissions) => file.set_permissions(permissions),
            None => Ok(()),
        })
        .and_then(|()| file.sync_all())
        .map_err(io)
        .and_then(|()| match check {
            Some(check) => check.verify(folder, leaf, path),
            None => Ok(()),
        })
        .and_then(|()| {
            rustix::fs::renameat(folder, &temp_name, folder, leaf).map_err(|e| io(e.into()))
        });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(folder, &temp_name, rustix::fs::AtFlags::empty());
    }
    written
}

/// Writes `bytes` to a new file `leaf` of `folder` without ever replacing one: into a fresh
/// temporary file of the folder (`O_EXCL`), synced, then moved onto `leaf` with
/// `RENAME_NOREPLACE` (or linked, where the file system refuses the flag: see
/// `move_fallback`). The temporary name is removed on every failure.
pub(super) fn create_new_file(
    folder: &Dir,
    leaf: &str,
    path: &str,
    bytes: &[u8],
) -> Result<(), PathError> {
    create_new_file_from(folder, leaf, path, &mut |file| file.write_all(bytes))
}

/// [`create_new_file`] with its content written by `fill` (which may stream it in parts).
pub(super) fn create_new_file_from(
    folder: &Dir,
    leaf: &str,
    path: &str,
    fill: &mut dyn FnMut(&mut cap_std::fs::File) -> std::io::Result<()>,
) -> Result<(), PathError> {
    let io = |e| from_io(path, e);
    let (temp_name, mut file) = temp_file(folder).map_err(io)?;
    let written = fill(&mut file)
        .and_then(|()| file.sync_all())
        .map_err(io)
        .and_then(|()| {
            let moved = match rustix::fs::renameat_with(
                folder,
                &temp_name,
                folder,
                leaf,
                RenameFlags::NOREPLACE,
            ) {
                Err(rustix::io::Errno::INVAL) => {
                    move_fallback::link_then_unlink(folder, &temp_name, folder, leaf)
                }
                moved => moved,
            };
            moved.map_err(|errno| match errno {
                rustix::io::Errno::EXIST => PathError::AlreadyExists {
                    path: Shown::new(path),
                },
                other => from_io(path, other.into()),
            })
        });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(folder, &temp_name, rustix::fs::AtFlags::empty());
    }
    written
}

/// A new, empty file of `folder` under a name no other entry has (`O_EXCL`), and that name.
pub(super) fn temp_file(folder: &Dir) -> std::io::Result<(String, cap_std::fs::File)> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    for attempt in 0..TEMP_NAME_ATTEMPTS {
        let name = format!(
            ".rojos-new-{}-{:08x}.tmp",
            std::process::id(),
            seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
        );
        match folder.open_with(&name, &options) {
            Ok(file) => return Ok((name, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
}
