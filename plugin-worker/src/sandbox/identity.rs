//! The user a worker runs as when the server runs as root (docs/security.md, "A worker of a
//! root server runs as the project's owner"): the owner of the project's root folder when that
//! is not root, so the files a plugin creates belong to the user who owns the project; else
//! `[plugins].worker_user` when it is set; else root, with every capability dropped.
//!
//! The change is made in the worker before Landlock and seccomp, and before the library is
//! opened: supplementary groups emptied, then the gid, then the uid (real, effective and
//! saved alike), so nothing the plugin runs can change back.

use std::mem::MaybeUninit;

use serde::{Deserialize, Serialize};

/// A uid and its gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerUser {
    /// The user id.
    pub uid: u32,
    /// The group id.
    pub gid: u32,
}

/// Whom a worker runs as: `None` keeps the server's own user (a server that is not root
/// has no other to give; a root server without `configured` keeps root, capabilities
/// dropped). `owner` is the uid and gid of the project root the worker serves, if any.
pub fn choose(
    server_is_root: bool,
    owner: Option<(u32, u32)>,
    configured: Option<WorkerUser>,
) -> Option<WorkerUser> {
    if !server_is_root {
        return None;
    }
    match owner {
        Some((uid, gid)) if uid != 0 => Some(WorkerUser { uid, gid }),
        _ => configured,
    }
}

/// Reads `[plugins].worker_user`: `"UID:GID"`, or a user name (its uid and primary gid, as
/// the system's user database gives them).
///
/// # Errors
///
/// Not a pair of numbers and no such user: the message says what to write.
pub fn parse(text: &str) -> Result<WorkerUser, String> {
    if let Some((uid, gid)) = text.split_once(':') {
        return match (uid.trim().parse(), gid.trim().parse()) {
            (Ok(uid), Ok(gid)) => Ok(WorkerUser { uid, gid }),
            _ => Err(format!(
                "{text:?} is not \"UID:GID\" (two numbers) nor a user name"
            )),
        };
    }
    let name = std::ffi::CString::new(text).map_err(|_| format!("{text:?} is not a user name"))?;
    let mut entry: MaybeUninit<libc::passwd> = MaybeUninit::uninit();
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: getpwnam_r writes the entry and the strings it points to into the buffers
    // given, and sets `found` to `entry` when it found the user.
    let status = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            entry.as_mut_ptr(),
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if status != 0 || found.is_null() {
        return Err(format!(
            "no user {text:?} on this system: name an existing user, or write \"UID:GID\""
        ));
    }
    // SAFETY: `found` is non-null, so getpwnam_r filled `entry`.
    let entry = unsafe { entry.assume_init() };
    Ok(WorkerUser {
        uid: entry.pw_uid,
        gid: entry.pw_gid,
    })
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Becomes `user`: no supplementary group, then its gid, then its uid. The kernel clears the
/// effective and permitted capabilities when the uids leave 0.
pub(super) fn assume(user: WorkerUser) -> Result<(), String> {
    let failed = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: plain system calls on integers (glibc applies them to every thread; the worker
    // has only one at this point).
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(failed("emptying the supplementary groups"));
        }
        if libc::setresgid(user.gid, user.gid, user.gid) != 0 {
            return Err(failed(&format!("becoming gid {}", user.gid)));
        }
        if libc::setresuid(user.uid, user.uid, user.uid) != 0 {
            return Err(failed(&format!("becoming uid {}", user.uid)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_server_gives_the_owner_else_the_configured_user_else_none() {
        let nobody = Some(WorkerUser {
            uid: 65534,
            gid: 65534,
        });
        let owner = WorkerUser {
            uid: 1000,
            gid: 100,
        };
        assert_eq!(choose(true, Some((1000, 100)), nobody), Some(owner));
        assert_eq!(choose(true, Some((0, 0)), nobody), nobody);
        assert_eq!(choose(true, None, nobody), nobody);
        assert_eq!(choose(true, Some((0, 0)), None), None);
        assert_eq!(choose(false, Some((1000, 100)), nobody), None);
    }

    #[test]
    fn a_worker_user_is_a_pair_of_ids_or_a_known_name() {
        assert_eq!(
            parse("1000:100"),
            Ok(WorkerUser {
                uid: 1000,
                gid: 100
            })
        );
        assert_eq!(parse("root"), Ok(WorkerUser { uid: 0, gid: 0 }));
        assert!(parse("no-such-user-here").unwrap_err().contains("no user"));
        assert!(parse("1000:x").unwrap_err().contains("UID:GID"));
    }
}
