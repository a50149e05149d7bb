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

/// Empties the bounding and ambient sets, then the effective, permitted and inheritable ones.
///
/// # Errors
///
/// A set could not be emptied.
pub(super) fn drop_all() -> Result<(), String> {
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
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data::default(); 2];
    // SAFETY: capset with a version-3 header reads two `Data` structs.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(failed("dropping capabilities"));
    }
    Ok(())
}
