//! A project folder on a FUSE file system that stops one operation until the test lets it
//! go (`held_fs.py`, on python's `mfusepy` and fuse3): a pass-through to a folder of its
//! own that, once armed, holds the first entry made under a given name. So a test can stop
//! the server in the middle of an undo's restore for as long as it needs, with no hook in
//! the server, and see which paths were looked up meanwhile.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

/// A mounted [`HeldFs`]; unmounted (and let go) when dropped.
#[derive(Debug)]
pub struct HeldFs {
    child: Child,
    mount: PathBuf,
    control: tempfile::TempDir,
    _backing: tempfile::TempDir,
}

impl HeldFs {
    /// Mounts at `mount` (made if missing, and empty) a pass-through of a new folder that,
    /// once [armed](HeldFs::arm), holds the first entry made with the name `hold`.
    pub fn mount(mount: &Path, hold: &str) -> HeldFs {
        std::fs::create_dir_all(mount).expect("mount point");
        let backing = tempfile::tempdir().expect("backing folder");
        let control = tempfile::tempdir().expect("control folder");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/support/held_fs.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(backing.path())
            .arg(mount)
            .arg(control.path())
            .arg(hold)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let wanted = format!(" {} ", mount.display());
        for _ in 0..3000 {
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
            if mounts
                .lines()
                .any(|l| l.contains(&wanted) && l.contains("fuse"))
            {
                return HeldFs {
                    child,
                    mount: mount.to_owned(),
                    control,
                    _backing: backing,
                };
            }
            if let Some(status) = child.try_wait().expect("python3's state") {
                panic!("held_fs.py ended ({status}) before mounting: fuse3 and python's mfusepy are needed");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("held_fs.py did not mount {} within 30 s", mount.display());
    }

    /// From now on, the first entry made under the held name waits.
    pub fn arm(&self) {
        std::fs::write(self.control.path().join("armed"), "").expect("arm");
    }

    /// Waits until an operation is held.
    pub async fn held(&mut self) {
        while !self.control.path().join("held").exists() {
            if let Some(status) = self.child.try_wait().expect("python3's state") {
                panic!("held_fs.py ended ({status}) before holding anything");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The paths looked up while the operation was held, in order (`/docs`, `/docs/a.txt`).
    pub fn looked_up(&self) -> Vec<String> {
        std::fs::read_to_string(self.control.path().join("lookups"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Lets the held operation (and every later one) go on.
    pub fn release(&self) {
        std::fs::write(self.control.path().join("release"), "").expect("release");
    }
}

impl Drop for HeldFs {
    fn drop(&mut self) {
        self.release();
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(&self.mount)
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
