//! The project lock: what keeps an undo's check and its restore together (docs/security.md,
//! "Undo holds the project's lock"). Every change of a project's files that undo could lose
//! holds it shared for its whole length — a changing tool call from before its recording to
//! after its fingerprints, an upload around its write — and an undo holds it exclusively from
//! its check to the end of its restore. So nothing is written between the check and the
//! restore: a change that came first is seen by the check (`409`, nothing lost), one that
//! comes later waits and lands on the restored files.
//!
//! Two layers, taken in this order: a lock per project in this host (`parking_lot`'s fair
//! `RwLock`: a waiting undo holds back later changes, so it is not starved), and `flock(2)` on
//! `<storage>/<projectId>/changes.lock` for the other hosts on the same storage
//! (docs/deploy.md). An undo waits at most [`UNDO_WAIT`] for the changes in progress (a hung
//! plugin holds its call's share until it returns), then is refused with `409`.

use std::{
    collections::HashMap,
    fs::File,
    io,
    sync::Arc,
    time::{Duration, Instant},
};

use cap_std::fs::{OpenOptions, OpenOptionsExt};
use parking_lot::{lock_api::ArcRwLockReadGuard, lock_api::ArcRwLockWriteGuard, RawRwLock};
use rustix::fs::{flock, FlockOperation};

use rojos_project_storage::{open_or_create_dir, ProjectId, Storage};

/// The file beside `root/` whose `flock` is the project lock between hosts.
const LOCK_FILE: &str = "changes.lock";

/// How long an undo waits for the changes in progress in its project.
pub(super) const UNDO_WAIT: Duration = Duration::from_secs(30);

/// How often an undo waiting for another host's changes tries the file lock again.
const RETRY_EVERY: Duration = Duration::from_millis(20);

/// Each project's lock in this host.
#[derive(Debug, Default)]
pub(super) struct ProjectLocks {
    locks: parking_lot::Mutex<HashMap<ProjectId, Arc<parking_lot::RwLock<()>>>>,
}

/// A held share of a project's lock (a change in progress), or the whole of it (an undo);
/// released when dropped.
#[derive(Debug)]
pub struct Held {
    /// The lock in this host.
    _here: Guard,
    /// The open lock file whose `flock` this holds (released when it is closed).
    _file: File,
}

#[derive(Debug)]
enum Guard {
    Shared(#[allow(dead_code)] ArcRwLockReadGuard<RawRwLock, ()>),
    Whole(#[allow(dead_code)] ArcRwLockWriteGuard<RawRwLock, ()>),
}

impl ProjectLocks {
    fn lock(&self, project: &ProjectId) -> Arc<parking_lot::RwLock<()>> {
        let mut locks = self.locks.lock();
        Arc::clone(locks.entry(project.clone()).or_default())
    }

    /// A share of `project`'s lock, for a change of its files: waits while an undo holds it.
    ///
    /// # Errors
    ///
    /// The lock file cannot be created or locked.
    pub(super) fn share(&self, storage: &Storage, project: &ProjectId) -> io::Result<Held> {
        let here = Guard::Shared(self.lock(project).read_arc());
        let file = lock_file(storage, project)?;
        flock(&file, FlockOperation::LockShared)?;
        Ok(Held {
            _here: here,
            _file: file,
        })
    }

    /// The whole of `project`'s lock, for an undo: `Ok(None)` when the changes in progress
    /// did not end within [`UNDO_WAIT`].
    ///
    /// # Errors
    ///
    /// The lock file cannot be created or locked.
    pub(super) fn whole(&self, storage: &Storage, project: &ProjectId) -> io::Result<Option<Held>> {
        let until = Instant::now() + UNDO_WAIT;
        let Some(here) = self.lock(project).try_write_arc_until(until) else {
            return Ok(None);
        };
        let file = lock_file(storage, project)?;
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < until => {
                    std::thread::sleep(RETRY_EVERY);
                }
                Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(Held {
            _here: Guard::Whole(here),
            _file: file,
        }))
    }
}

/// Opens (creating) `<storage>/<projectId>/changes.lock`, never through a link.
fn lock_file(storage: &Storage, project: &ProjectId) -> io::Result<File> {
    let folder = open_or_create_dir(storage.dir(), project.as_str())?;
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .create(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32);
    Ok(folder.open_with(LOCK_FILE, &options)?.into_std())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undo_waits_for_a_change_and_a_change_for_an_undo_and_other_projects_wait_for_neither() {
        let temp = tempfile::tempdir().expect("temp");
        let storage = Storage::open(temp.path()).expect("storage");
        let locks = ProjectLocks::default();
        let (demo, other) = (
            ProjectId::parse("demo").expect("id"),
            ProjectId::parse("other").expect("id"),
        );
        let change = locks.share(&storage, &demo).expect("share");
        let second = locks
            .share(&storage, &demo)
            .expect("changes share the lock");
        // With the lock file's flock taken by this process's other open, the host's own lock
        // is what the undo waits for: try it without waiting.
        assert!(locks.lock(&demo).try_write_arc().is_none());
        let undo_elsewhere = locks.whole(&storage, &other).expect("lock");
        assert!(undo_elsewhere.is_some(), "another project's undo is free");
        drop((change, second));
        let undo = locks.whole(&storage, &demo).expect("lock").expect("free");
        assert!(locks.lock(&demo).try_read_arc().is_none(), "a change waits");
        drop(undo);
        assert!(locks.lock(&demo).try_read_arc().is_some());
    }
}
