//! The log's folders: synced so names survive a crash ([`sync_dir`]), created as the
//! storage's are ([`open_or_create`]).

use std::io;

use cap_std::fs::{Dir, OpenOptions};

/// Syncs a folder, so the names in it survive a crash: through its own handle when that was
/// opened for reading (`Handle::Readable`), else through one opened for it (cap-std's own
/// folder handles are `O_PATH`, which cannot be synced: `EBADF`).
pub(crate) fn sync_dir(dir: &Dir) -> io::Result<()> {
    use cap_std::fs::OpenOptionsExt;
    match rustix::fs::fsync(dir) {
        Err(rustix::io::Errno::BADF) => {}
        synced => return synced.map_err(io::Error::from),
    }
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32);
    dir.open_with(".", &options)?.sync_all()
}

/// A checkpoint's folders are created as the storage's are (not synced: a log that holds
/// content syncs the folders on its way, `Checkpoints::record`).
pub(crate) use rojos_project_storage::open_or_create_dir as open_or_create;
