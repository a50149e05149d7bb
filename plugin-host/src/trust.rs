//! Whose code the server runs: a plugin's constructors run inside `dlopen`, so a library is
//! opened only when nobody but the server's user (its effective uid) or root could have put
//! its bytes there (docs/plugins.md, "Who may provide a plugin").
//!
//! The rule, checked at every load and every drop-in scan:
//! - the folder path is resolved first (symlinks in it followed, as OpenSSH's `safe_path`
//!   does), then every component of the real path, from `/` down, is opened without following
//!   symlinks and `fstat`ed: each is owned by the server's user or root and not writable by
//!   group or others; an ancestor (not the folder itself) owned by root with the sticky bit,
//!   such as `/tmp`, is accepted, since there nobody can rename or remove another's entries;
//! - the library is opened in that folder without following a symlink (`O_NOFOLLOW`), with
//!   `O_NONBLOCK` (a FIFO must not hang the watcher) and `O_CLOEXEC`, and its descriptor is
//!   `fstat`ed: a regular file, owned by the server's user or root, not group/other-writable.
//!
//! The caller reads the bytes from the descriptor returned here, so what is loaded is what was
//! checked. Each component is opened relative to the one above it, so no rename during the
//! walk can swap in an unchecked folder.

use std::{
    ffi::OsStr,
    fmt,
    fs::File,
    os::fd::OwnedFd,
    path::{Component, Path, PathBuf},
    sync::Arc,
};

use rustix::{
    fs::{fstat, openat, FileType, Mode, OFlags, CWD},
    io::Errno,
};

/// Why a path may not hold code for this server; [`Distrust::fix`] says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    /// The library is a symbolic link (its target is not checked, so it is not followed).
    #[error("'{}' is a symbolic link", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// The library is a FIFO, device, socket or folder.
    #[error("'{}' is not a regular file", path.display())]
    NotAFile {
        /// The object.
        path: PathBuf,
    },
    /// A folder of the chain is not a folder (it was replaced while being checked).
    #[error("'{}' is not a folder", path.display())]
    NotAFolder {
        /// The object.
        path: PathBuf,
    },
    /// Owned by a user other than the server's and root.
    #[error("'{}' is owned by uid {owner}, not by the server's user (uid {server}) or root", path.display())]
    Owner {
        /// The file or folder.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The server's effective uid.
        server: u32,
    },
    /// Writable by group or others (and not a root-owned sticky ancestor).
    #[error("'{}' is writable by group or others (mode {mode:o})", path.display())]
    Writable {
        /// The file or folder.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl Distrust {
    /// What the operator can do about it, as a command where there is one.
    pub fn fix(&self) -> String {
        match self {
            Distrust::Symlink { .. } => "replace the symlink by the file it points to".to_owned(),
            Distrust::NotAFile { path } | Distrust::NotAFolder { path } => {
                format!(
                    "remove '{}': only regular files in real folders are loaded",
                    path.display()
                )
            }
            Distrust::Owner {
                path, server: 0, ..
            } => format!("chown root '{}'", path.display()),
            Distrust::Owner { path, server, .. } => format!(
                "chown {server} '{}' (the server's user), or chown it to root",
                path.display()
            ),
            Distrust::Writable { path, .. } => format!("chmod go-w '{}'", path.display()),
        }
    }
}

/// A file or folder on a plugin's path that could not be opened or inspected: `'<path>':
/// <error>`. Cloned with the load result it belongs to, hence the shared source.
#[derive(Debug, Clone)]
pub struct PathIoError {
    /// The file or folder.
    pub path: PathBuf,
    /// What the system said.
    pub source: Arc<std::io::Error>,
}

impl fmt::Display for PathIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}': {}", self.path.display(), self.source)
    }
}

impl std::error::Error for PathIoError {
    /// The `io::Error` itself (not the `Arc` sharing it), so callers can downcast to it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl PathIoError {
    pub(crate) fn new(path: &Path, source: std::io::Error) -> PathIoError {
        PathIoError {
            path: path.to_owned(),
            source: Arc::new(source),
        }
    }
}

/// Why a plugin file or folder was not opened.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// It could not be opened or inspected (missing, no permission).
    Io(PathIoError),
    /// It was opened and is not safe to load code from.
    Untrusted(Distrust),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Io(error) => error.fmt(f),
            Refusal::Untrusted(distrust) => write!(f, "{distrust}; fix: {}", distrust.fix()),
        }
    }
}

/// Where an object sits in the chain: the rule differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A folder above the plugin folder: a root-owned sticky folder may be world-writable.
    Ancestor,
    /// The folder holding the library (the drop-in folder, or a `[plugins].load` file's).
    Folder,
    /// The library file.
    Library,
}

/// The two facts the rule reads from an `fstat`.
#[derive(Debug, Clone, Copy)]
struct Inode {
    uid: u32,
    /// `st_mode`: file type and permission bits.
    mode: u32,
}

const GROUP_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Opens the plugin library at `path` for reading, once the folder chain and the file pass the
/// rule; read the bytes to load from the returned file.
pub(crate) fn open_library(path: &Path) -> Result<File, Refusal> {
    let server = server_uid();
    let Some(name) = path.file_name() else {
        let not_a_file = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name");
        return Err(Refusal::Io(PathIoError::new(path, not_a_file)));
    };
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let (folder_fd, real_folder) = open_folder_chain(folder, server)?;
    let real = real_folder.join(name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = openat(&folder_fd, name, flags, Mode::empty()).map_err(|e| match e {
        // O_NOFOLLOW on a symlink fails with ELOOP.
        Errno::LOOP => Refusal::Untrusted(Distrust::Symlink { path: real.clone() }),
        e => io_refusal(&real, e),
    })?;
    judge(&real, inode_of(&fd, &real)?, Place::Library, server).map_err(Refusal::Untrusted)?;
    Ok(File::from(fd))
}

/// Checks that `dir` may hold plugins (the drop-in folder at each scan).
pub(crate) fn check_folder(dir: &Path) -> Result<(), Refusal> {
    open_folder_chain(dir, server_uid()).map(drop)
}

/// The effective uid the rule trusts besides root.
fn server_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Resolves `dir`, then opens and judges each component of the real path from `/` down;
/// returns the folder's descriptor and its real path.
fn open_folder_chain(dir: &Path, server: u32) -> Result<(OwnedFd, PathBuf), Refusal> {
    let real = dir
        .canonicalize()
        .map_err(|e| Refusal::Io(PathIoError::new(dir, e)))?;
    let names: Vec<&OsStr> = real
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at = PathBuf::from("/");
    let mut fd = openat(CWD, &at, flags, Mode::empty()).map_err(|e| io_refusal(&at, e))?;
    let place_of = |depth: usize| {
        if depth == names.len() {
            Place::Folder
        } else {
            Place::Ancestor
        }
    };
    judge(&at, inode_of(&fd, &at)?, place_of(0), server).map_err(Refusal::Untrusted)?;
    for (i, name) in names.iter().enumerate() {
        at.push(name);
        fd = openat(&fd, *name, flags, Mode::empty()).map_err(|e| io_refusal(&at, e))?;
        judge(&at, inode_of(&fd, &at)?, place_of(i + 1), server).map_err(Refusal::Untrusted)?;
    }
    Ok((fd, real))
}

fn inode_of(fd: &OwnedFd, path: &Path) -> Result<Inode, Refusal> {
    let stat = fstat(fd).map_err(|e| io_refusal(path, e))?;
    Ok(Inode {
        uid: stat.st_uid,
        mode: stat.st_mode,
    })
}

fn io_refusal(path: &Path, e: Errno) -> Refusal {
    Refusal::Io(PathIoError::new(path, std::io::Error::from(e)))
}

/// The rule for one object of the chain.
fn judge(path: &Path, inode: Inode, place: Place, server: u32) -> Result<(), Distrust> {
    let path = || path.to_owned();
    let kind = FileType::from_raw_mode(inode.mode);
    match (place, kind) {
        (_, FileType::Symlink) => return Err(Distrust::Symlink { path: path() }),
        (Place::Library, FileType::RegularFile) => {}
        (Place::Library, _) => return Err(Distrust::NotAFile { path: path() }),
        (Place::Ancestor | Place::Folder, FileType::Directory) => {}
        (Place::Ancestor | Place::Folder, _) => return Err(Distrust::NotAFolder { path: path() }),
    }
    if inode.uid != server && inode.uid != 0 {
        return Err(Distrust::Owner {
            path: path(),
            owner: inode.uid,
            server,
        });
    }
    let sticky_root_ancestor =
        place == Place::Ancestor && inode.uid == 0 && inode.mode & STICKY != 0;
    if inode.mode & GROUP_OTHER_WRITE != 0 && !sticky_root_ancestor {
        return Err(Distrust::Writable {
            path: path(),
            mode: inode.mode & 0o7777,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const DIR: u32 = 0o040_000;
    const FILE: u32 = 0o100_000;
    const LINK: u32 = 0o120_000;
    const SERVER: u32 = 1000;

    fn verdict(uid: u32, mode: u32, place: Place) -> Result<(), Distrust> {
        judge(Path::new("/x"), Inode { uid, mode }, place, SERVER)
    }

    #[test]
    fn a_root_owned_sticky_ancestor_like_tmp_is_accepted() {
        assert_eq!(verdict(0, DIR | 0o1777, Place::Ancestor), Ok(()));
    }

    #[test]
    fn a_sticky_folder_is_not_accepted_as_the_plugin_folder_itself() {
        assert!(matches!(
            verdict(0, DIR | 0o1777, Place::Folder),
            Err(Distrust::Writable { mode: 0o1777, .. })
        ));
    }

    #[test]
    fn a_sticky_ancestor_owned_by_the_server_user_is_not_enough() {
        assert!(matches!(
            verdict(SERVER, DIR | 0o1777, Place::Ancestor),
            Err(Distrust::Writable { .. })
        ));
    }

    #[test]
    fn a_group_writable_ancestor_without_sticky_bit_is_refused() {
        assert_eq!(
            verdict(0, DIR | 0o775, Place::Ancestor),
            Err(Distrust::Writable {
                path: "/x".into(),
                mode: 0o775
            })
        );
    }

    #[test]
    fn an_ancestor_owned_by_another_user_is_refused_even_with_safe_mode() {
        assert_eq!(
            verdict(65534, DIR | 0o755, Place::Ancestor),
            Err(Distrust::Owner {
                path: "/x".into(),
                owner: 65534,
                server: SERVER
            })
        );
    }

    #[test]
    fn folders_and_files_of_the_server_user_or_root_with_safe_modes_pass() {
        assert_eq!(verdict(SERVER, DIR | 0o755, Place::Ancestor), Ok(()));
        assert_eq!(verdict(0, DIR | 0o700, Place::Folder), Ok(()));
        assert_eq!(verdict(SERVER, FILE | 0o755, Place::Library), Ok(()));
        assert_eq!(verdict(0, FILE | 0o644, Place::Library), Ok(()));
    }

    #[test]
    fn a_library_must_be_a_safe_regular_file() {
        assert!(matches!(
            verdict(SERVER, FILE | 0o664, Place::Library),
            Err(Distrust::Writable { mode: 0o664, .. })
        ));
        assert!(matches!(
            verdict(SERVER, FILE | 0o1646, Place::Library),
            Err(Distrust::Writable { .. })
        ));
        assert!(matches!(
            verdict(7, FILE | 0o644, Place::Library),
            Err(Distrust::Owner { owner: 7, .. })
        ));
        assert!(matches!(
            verdict(SERVER, LINK | 0o777, Place::Library),
            Err(Distrust::Symlink { .. })
        ));
        assert!(matches!(
            verdict(SERVER, DIR | 0o755, Place::Library),
            Err(Distrust::NotAFile { .. })
        ));
    }

    #[test]
    fn each_refusal_says_how_to_fix_it() {
        let path = PathBuf::from("/srv/p");
        let fix = |d: Distrust| d.fix();
        assert_eq!(
            fix(Distrust::Writable {
                path: path.clone(),
                mode: 0o777
            }),
            "chmod go-w '/srv/p'"
        );
        assert_eq!(
            fix(Distrust::Owner {
                path: path.clone(),
                owner: 5,
                server: 0
            }),
            "chown root '/srv/p'"
        );
        assert_eq!(
            fix(Distrust::Owner {
                path: path.clone(),
                owner: 5,
                server: 1000
            }),
            "chown 1000 '/srv/p' (the server's user), or chown it to root"
        );
        assert_eq!(
            fix(Distrust::Symlink { path }),
            "replace the symlink by the file it points to"
        );
    }

    // On the real file system (a temp folder under a safe chain, as on CI and dev machines).

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_safe_library_opens_and_reads_the_checked_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libx.so");
        std::fs::write(&lib, "bytes").unwrap();
        chmod(&lib, 0o644);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_library(&lib).unwrap(), &mut text).unwrap();
        assert_eq!(text, "bytes");
    }

    #[test]
    fn a_symlinked_library_is_refused_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.so"), "bytes").unwrap();
        std::os::unix::fs::symlink("real.so", dir.path().join("libx.so")).unwrap();
        let real = dir.path().canonicalize().unwrap().join("libx.so");
        assert!(matches!(
            open_library(&dir.path().join("libx.so")),
            Err(Refusal::Untrusted(Distrust::Symlink { path })) if path == real
        ));
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("libx.so");
        rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
        assert!(matches!(
            open_library(&fifo),
            Err(Refusal::Untrusted(Distrust::NotAFile { .. }))
        ));
    }

    #[test]
    fn a_group_writable_folder_is_refused_through_a_symlink_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        chmod(&real, 0o775);
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        let error = check_folder(&dir.path().join("link")).unwrap_err();
        let real = real.canonicalize().unwrap();
        assert_eq!(
            error.to_string(),
            format!(
                "'{0}' is writable by group or others (mode 775); fix: chmod go-w '{0}'",
                real.display()
            )
        );
    }

    #[test]
    fn a_missing_library_is_an_io_refusal_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = open_library(&dir.path().join("libnone.so")).unwrap_err();
        assert!(
            matches!(&error, Refusal::Io(e) if e.path.ends_with("libnone.so") && e.source.kind() == std::io::ErrorKind::NotFound),
            "{error}"
        );
    }
}
