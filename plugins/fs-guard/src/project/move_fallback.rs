//! Moving without `RENAME_NOREPLACE`, for file systems that refuse the flag with `EINVAL`:
//! Linux's NFS client, and FUSE file systems without `rename2`. `ProjectDir::rename` turns
//! to these only after the kernel refused the flag, and keeps their guarantee as far as the
//! file system allows (docs/deploy.md, "On NFS"):
//!
//! - a file or a link is hard-linked to its new name, which fails if the name exists
//!   (atomically, as `RENAME_NOREPLACE` would), then its old name is removed: never a
//!   replacement; a crash in between leaves both names on the same content;
//! - a folder cannot be hard-linked: it is renamed once its new name was seen free. A
//!   folder created under that name in between would be replaced only if empty (a rename
//!   never replaces a folder that holds anything, nor a file), so nothing is lost.
//!
//! `EINVAL` is also the kernel's answer to a folder moved into itself: then the plain
//! rename of [`rename_if_free`] is refused by the kernel with `EINVAL` again, and the caller
//! reports it as such.

use cap_std::fs::Dir;
use rustix::fs::AtFlags;
use rustix::io::Errno;

/// A file or link (`leaf` in `from`) linked to `to_leaf` in `to`, then unlinked from
/// `from`. When the old name cannot be removed, the new one is, so nothing changed.
pub(super) fn link_then_unlink(
    from: &Dir,
    leaf: &str,
    to: &Dir,
    to_leaf: &str,
) -> Result<(), Errno> {
    // Without AT_SYMLINK_FOLLOW, a link is linked as a link, not its target.
    rustix::fs::linkat(from, leaf, to, to_leaf, AtFlags::empty())?;
    if let Err(e) = rustix::fs::unlinkat(from, leaf, AtFlags::empty()) {
        let _ = rustix::fs::unlinkat(to, to_leaf, AtFlags::empty());
        return Err(e);
    }
    Ok(())
}

/// The folder `leaf` in `from` renamed to `to_leaf` in `to` if nothing has that name
/// (`EEXIST` otherwise).
pub(super) fn rename_if_free(from: &Dir, leaf: &str, to: &Dir, to_leaf: &str) -> Result<(), Errno> {
    match rustix::fs::statat(to, to_leaf, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => Err(Errno::EXIST),
        Err(Errno::NOENT) => rustix::fs::renameat(from, leaf, to, to_leaf),
        Err(e) => Err(e),
    }
}
