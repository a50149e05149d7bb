//! Dropping every capability: a worker of a server that runs as root keeps root's uid (so
//! the files a plugin creates in a project are owned as the server's own are) but none of
//! root's powers — no capability in its effective, permitted, inheritable, ambient or bounding
//! set, so it cannot override file permissions (`CAP_DAC_OVERRIDE`), change owners, load
//! modules, or get any capability back through an `execve` (docs/security.md, "Plugin
//! workers"). A worker of an unprivileged server has none to drop.

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `CAP_SETGID` (6) and `CAP_SETUID` (7), as a mask of the capability sets.
pub(super) const SET_IDS: u64 = (1 << 6) | (1 << 7);

/// Empties the bounding and ambient sets, then the effective, permitted and inheritable ones.
///
/// # Errors
///
/// A set could not be emptied.
pub(super) fn drop_all() -> Result<(), String> {
    drop_all_but(0)
}

/// Empties the bounding and ambient sets, and every capability of the effective and
/// permitted sets but those in `kept` (a mask); the inheritable set is emptied.
///
/// # Errors
///
/// A set could not be emptied.
pub(super) fn drop_all_but(kept: u64) -> Result<(), String> {
    let failed = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    drop_bounding()?;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget with a version-3 header writes two `Data` structs.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(failed("reading capabilities"));
    }
    for (word, data) in data.iter_mut().enumerate() {
        #[allow(clippy::cast_possible_truncation)]
        let kept = (kept >> (32 * word)) as u32;
        data.effective &= kept;
        data.permitted &= kept;
        data.inheritable = 0;
    }
    // SAFETY: capset with a version-3 header reads two `Data` structs.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(failed("dropping capabilities"));
    }
    Ok(())
}

/// Empties the bounding and ambient sets (the bounding set needs `CAP_SETPCAP`, so this
/// comes before the other sets are emptied).
///
/// # Errors
///
/// A capability could not be dropped from the bounding set.
pub(super) fn drop_bounding() -> Result<(), String> {
    let failed = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // The bounding set first: dropping from it needs CAP_SETPCAP, which goes last.
    for cap in 0..64 {
        // SAFETY: prctl reads only its integer arguments.
        let held = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
        if held < 0 {
            break; // past the last capability this kernel knows
        }
        // SAFETY: as above.
        if held == 1 && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            return Err(failed("dropping the capability bounding set"));
        }
    }
    // SAFETY: as above. EINVAL on kernels without ambient capabilities, which have none.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    Ok(())
}
