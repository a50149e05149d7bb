//! The loader's private copies live in `<tmp>/rojos-plugins-<pid>-XXXX/` (0700). A server
//! that is killed, or a process whose loader is never dropped, leaves its folder behind (one
//! copy of every plugin it loaded: hundreds of MB with debug builds), so each new loader first
//! removes the folders of processes that no longer run. Only folders the server's own user
//! owns are touched; a reused pid only delays a folder's removal.

use std::{os::unix::fs::MetadataExt, path::Path};

/// The name every copy folder starts with.
const PREFIX: &str = "rojos-plugins-";

/// A fresh 0700 folder for this process's copies, after removing stale ones in `tmp`.
pub(super) fn fresh_folder(tmp: &Path) -> std::io::Result<tempfile::TempDir> {
    remove_stale(tmp);
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-", std::process::id()))
        .tempdir_in(tmp)
}

/// Removes the copy folders in `tmp` whose process is gone.
fn remove_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let uid = rustix::process::geteuid().as_raw();
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if is_stale(&path, uid) {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::debug!(folder = %path.display(), error = %e, "cannot remove a stale plugin copy folder");
            }
        }
    }
}

fn is_stale(path: &Path, uid: u32) -> bool {
    let Some(pid) = owner_pid(path) else {
        return false;
    };
    let ours = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
    ours && !process_runs(pid)
}

/// The pid in `rojos-plugins-<pid>-XXXX`.
fn owner_pid(path: &Path) -> Option<i32> {
    let name = path.file_name()?.to_str()?;
    let (pid, _) = name.strip_prefix(PREFIX)?.split_once('-')?;
    pid.parse().ok().filter(|pid| *pid > 0)
}

fn process_runs(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    // EPERM means it runs under another user.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_of_dead_processes_go_and_live_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid far above any pid_max in use is never running.
        let dead = tmp.path().join(format!("{PREFIX}2000000000-abc"));
        let live = tmp
            .path()
            .join(format!("{PREFIX}{}-def", std::process::id()));
        let other = tmp.path().join("rojos-plugins-notapid-x");
        for folder in [&dead, &live, &other] {
            std::fs::create_dir(folder).unwrap();
            std::fs::write(folder.join("lib.so"), "x").unwrap();
        }
        let fresh = fresh_folder(tmp.path()).unwrap();
        assert!(!dead.exists(), "a dead process's copies are removed");
        assert!(live.exists() && other.exists());
        assert!(fresh
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{PREFIX}{}-", std::process::id())));
    }
}
