//! A live mount of `tests/nfs_like_fs.py`, a FUSE file system that refuses
//! `renameat2(RENAME_NOREPLACE)` with `EINVAL` and has no `O_TMPFILE`, as Linux's NFS client
//! (docs/deploy.md, "On NFS"). [`NfsLikeMount::start`] mounts it in a temp folder and waits
//! until the kernel lists it; dropping the value unmounts it, also when a test panics.
//! Missing FUSE, `fusermount3`, `python3` or `mfusepy` fail the test with how to install
//! them: a test that proves the fallbacks is never skipped silently.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The file system's script, in this crate's `tests/` folder.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nfs_like_fs.py");

/// How to get what the mount needs, for the failure message.
const INSTALL: &str = "install them with `apt-get install -y fuse3 libfuse3-3` and \
                       `pip install mfusepy` (run as root: mounting needs /dev/fuse)";

/// How long the script may take to mount (Python start-up and libfuse's handshake).
const MOUNT_DEADLINE: Duration = Duration::from_secs(20);

/// The running file system. Fields drop after [`Drop::drop`] unmounted it: the temp folder
/// (backing folder, mount point, log) goes last.
#[derive(Debug)]
pub(super) struct NfsLikeMount {
    child: Child,
    mount_point: PathBuf,
    log: PathBuf,
    _temp: tempfile::TempDir,
}

impl NfsLikeMount {
    /// Mounts a fresh, empty file system; panics (saying how to install what is missing, or
    /// with the script's output) if it cannot.
    pub(super) fn start() -> Self {
        require_fuse_tools();
        let temp = tempfile::Builder::new()
            .prefix("rojos-nfs-like-")
            .tempdir()
            .expect("create the mount's temp folder");
        let backing = temp.path().join("backing");
        let mount_point = temp.path().join("mount");
        for folder in [&backing, &mount_point] {
            fs::create_dir(folder).expect("create the backing folder and mount point");
        }
        let log = temp.path().join("fs.log");
        let out = fs::File::create(&log).expect("create the file system's log");
        let err = out.try_clone().expect("duplicate the log descriptor");
        let child = Command::new("python3")
            .arg(SCRIPT)
            .arg(&backing)
            .arg(&mount_point)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run python3 ({e}): {INSTALL}"));
        let mut mount = NfsLikeMount {
            child,
            mount_point,
            log,
            _temp: temp,
        };
        mount.wait_until_mounted();
        mount
    }

    /// The mount point: everything under it goes through the FUSE file system.
    pub(super) fn path(&self) -> &Path {
        &self.mount_point
    }

    fn wait_until_mounted(&mut self) {
        let deadline = Instant::now() + MOUNT_DEADLINE;
        while !is_mounted(&self.mount_point) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the NFS-like file system exited ({status}) before mounting: {}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the NFS-like file system did not mount within {MOUNT_DEADLINE:?}: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(no log: {e})"))
    }
}

impl Drop for NfsLikeMount {
    fn drop(&mut self) {
        if is_mounted(&self.mount_point) {
            let unmounted = Command::new("fusermount3")
                .arg("-u")
                .arg(&self.mount_point)
                .status()
                .is_ok_and(|s| s.success());
            if !unmounted {
                // Busy (a test left a descriptor open): detach it now, it goes when closed.
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(&self.mount_point)
                    .status();
            }
        }
        // Unmounted, the script returns from libfuse's loop; kill it if it does not.
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether `mount_point` is a mount point in this process's namespace (the fifth field of
/// a `/proc/self/mountinfo` line, compared verbatim: mountinfo escapes spaces, tabs and
/// backslashes, which a temp folder's name does not hold).
fn is_mounted(mount_point: &Path) -> bool {
    let Ok(table) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let wanted = mount_point.to_string_lossy();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(&*wanted))
}

/// Panics, saying how to install them, unless `/dev/fuse`, `fusermount3`, `python3` and its
/// `mfusepy` module are all there.
fn require_fuse_tools() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing (no FUSE in this kernel or container): {INSTALL}"
    );
    let works = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(
        works("fusermount3", &["-V"]),
        "fusermount3 is missing: {INSTALL}"
    );
    assert!(
        works("python3", &["-c", "import mfusepy"]),
        "python3 or its mfusepy module is missing: {INSTALL}"
    );
}
