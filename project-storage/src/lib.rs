//! Project storage: `<storage>/<projectId>/root/`, opened as capabilities.
//!
//! The storage folder is opened once at start (operator-trusted, may be a symlink); each
//! project folder and its `root` are opened without following symlinks, so no project id and
//! no planted link can make one project reach another. Tools receive the opened root only.

mod project;

pub use project::{ProjectId, ProjectIdError};

use std::{
    io,
    path::{Path, PathBuf},
};

use cap_fs_ext::DirExt;
use cap_std::{ambient_authority, fs::Dir};

/// The opened storage folder.
#[derive(Debug)]
pub struct Storage {
    dir: Dir,
    /// The folder's absolute path, for per-project MCP servers' `{project_root}`.
    path: PathBuf,
}

impl Storage {
    /// Opens (and creates if missing) the storage folder at `path`.
    ///
    /// # Errors
    ///
    /// The folder cannot be created or opened.
    pub fn open(path: &Path) -> io::Result<Storage> {
        std::fs::create_dir_all(path)?;
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        let path = std::fs::canonicalize(path)?;
        Ok(Storage { dir, path })
    }

    /// The storage folder itself (for the database and other server files).
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Opens `<projectId>/root/`, creating both folders on first use. A symlink at either
    /// level is refused.
    ///
    /// # Errors
    ///
    /// I/O errors, or a symlink where a folder should be.
    pub fn project_root(&self, id: &ProjectId) -> io::Result<Dir> {
        if let Some(root) = self.open_existing(id, "root", Handle::Path) {
            return Ok(root);
        }
        let project = open_or_create_dir(&self.dir, id.as_str())?;
        open_or_create_dir(&project, "root")
    }

    /// Opens the existing folder `<id>/<name>` in one resolution, refusing any symbolic link
    /// on the way: one system call where opening each folder in turn takes two and a close,
    /// on every chat (bench/PROFILE.md, sixteenth round). `None` when that fails for any
    /// reason (a missing folder, a link, a kernel without `openat2`): the caller then takes
    /// the way that opens each folder in turn, which creates what is missing and names the
    /// refusal. `name` must be one plain name, as the project id is.
    pub fn open_existing(&self, id: &ProjectId, name: &str, handle: Handle) -> Option<Dir> {
        use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
        let mut flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if handle == Handle::Path {
            flags |= OFlags::PATH;
        }
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let path = format!("{}/{name}", id.as_str());
        let fd = openat2(&self.dir, path.as_str(), flags, Mode::empty(), how).ok()?;
        Some(Dir::from_std_file(std::fs::File::from(fd)))
    }

    /// Opens `<projectId>/root/` if it exists, creating nothing (`None` when either folder
    /// is missing): what a read of the project's files uses, so looking does not make a
    /// project appear in `GET /projects`. A symlink at either level is refused.
    ///
    /// # Errors
    ///
    /// I/O errors other than a missing folder, or a symlink where a folder should be.
    pub fn existing_project_root(&self, id: &ProjectId) -> io::Result<Option<Dir>> {
        if let Some(root) = self.open_existing(id, "root", Handle::Path) {
            return Ok(Some(root));
        }
        let missing = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
        let project = match self.dir.open_dir_nofollow(id.as_str()) {
            Err(e) if missing(&e) => return Ok(None),
            other => other?,
        };
        match project.open_dir_nofollow("root") {
            Err(e) if missing(&e) => Ok(None),
            other => other.map(Some),
        }
    }

    /// The absolute path of `<projectId>/root/` (what [`Storage::project_root`] opens), given
    /// to per-project MCP servers, which are processes of their own (`docs/mcp.md`).
    pub fn project_root_path(&self, id: &ProjectId) -> PathBuf {
        self.path.join(id.as_str()).join("root")
    }
}

/// What a folder handle of [`Storage::open_existing`] can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handle {
    /// Name things beneath it only (`O_PATH`, as cap-std opens folders).
    Path,
    /// Also list and sync it.
    Readable,
}

/// Opens the folder `name` of `parent` without following a symlink, creating it if missing
/// (not synced: callers that need the name to survive a crash sync `parent`).
pub fn open_or_create_dir(parent: &Dir, name: &str) -> io::Result<Dir> {
    match parent.open_dir_nofollow(name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match parent.create_dir(name) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            parent.open_dir_nofollow(name)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_root_is_created_on_first_use() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = Storage::open(&tmp.path().join("storage")).unwrap();
        let root = storage
            .project_root(&ProjectId::parse("demo").unwrap())
            .unwrap();
        root.write("hello.txt", "hi").unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("storage/demo/root/hello.txt")).unwrap(),
            "hi"
        );
    }

    #[test]
    fn a_symlinked_project_or_root_folder_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("storage");
        let storage = Storage::open(&base).unwrap();
        storage
            .project_root(&ProjectId::parse("p1").unwrap())
            .unwrap();
        std::os::unix::fs::symlink("p1", base.join("p2")).unwrap();
        std::fs::create_dir(base.join("p3")).unwrap();
        std::os::unix::fs::symlink("../p1/root", base.join("p3/root")).unwrap();
        for id in ["p2", "p3"] {
            let id = ProjectId::parse(id).unwrap();
            assert!(storage.project_root(&id).is_err(), "{id}");
            assert!(storage.existing_project_root(&id).is_err(), "{id}");
        }
    }

    #[test]
    fn an_existing_folder_opens_in_one_resolution_and_a_link_or_a_gap_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("storage");
        let storage = Storage::open(&base).unwrap();
        let id = |name: &str| ProjectId::parse(name).unwrap();
        storage.project_root(&id("p1")).unwrap();
        std::fs::create_dir(base.join("p1/checkpoints")).unwrap();
        std::os::unix::fs::symlink("p1", base.join("p2")).unwrap();
        std::fs::create_dir(base.join("p3")).unwrap();
        std::os::unix::fs::symlink("../p1/root", base.join("p3/root")).unwrap();
        std::fs::create_dir(base.join("p4")).unwrap();

        let root = storage.open_existing(&id("p1"), "root", Handle::Path);
        root.expect("a real folder opens")
            .write("a.txt", "a")
            .unwrap();
        assert!(base.join("p1/root/a.txt").exists());
        for (project, why) in [
            ("p2", "the project is a link"),
            ("p3", "root is a link"),
            ("p4", "root is missing"),
            ("p5", "the project is missing"),
        ] {
            assert!(
                storage
                    .open_existing(&id(project), "root", Handle::Path)
                    .is_none(),
                "{why}"
            );
        }
        assert!(!base.join("p4/root").exists(), "nothing is created");

        // A readable handle can be listed and synced; an `O_PATH` one cannot be synced.
        let readable = storage
            .open_existing(&id("p1"), "checkpoints", Handle::Readable)
            .unwrap();
        rustix::fs::fsync(&readable).expect("a readable folder syncs");
        assert_eq!(readable.entries().unwrap().count(), 0);
        let path_only = storage
            .open_existing(&id("p1"), "checkpoints", Handle::Path)
            .unwrap();
        assert_eq!(rustix::fs::fsync(&path_only), Err(rustix::io::Errno::BADF));
    }

    #[test]
    fn an_existing_root_is_opened_without_creating_a_missing_one() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("storage");
        let storage = Storage::open(&base).unwrap();
        let demo = ProjectId::parse("demo").unwrap();
        assert!(storage.existing_project_root(&demo).unwrap().is_none());
        assert!(!base.join("demo").exists());
        std::fs::create_dir(base.join("demo")).unwrap();
        assert!(storage.existing_project_root(&demo).unwrap().is_none());
        assert!(!base.join("demo/root").exists());
        storage
            .project_root(&demo)
            .unwrap()
            .write("a.txt", "a")
            .unwrap();
        let root = storage.existing_project_root(&demo).unwrap().unwrap();
        assert_eq!(root.read_to_string("a.txt").unwrap(), "a");
    }
}
