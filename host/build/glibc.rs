// Shared by `host/build.rs` and the test that checks what it decided
// (`host/tests/e2e/binary.rs`), through `include!`: a build script cannot use the crate it
// builds.

/// Whether the C library this process runs on is glibc `major.minor` or later.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_at_least(major: u32, minor: u32) -> bool {
    extern "C" {
        fn gnu_get_libc_version() -> *const std::ffi::c_char;
    }
    // SAFETY: glibc returns a pointer to a static, NUL-terminated version string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    let mut parts = version.to_str().unwrap_or_default().split('.');
    let mut next = || {
        parts
            .next()
            .and_then(|part| part.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (next(), next()) >= (major, minor)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_at_least(_major: u32, _minor: u32) -> bool {
    false
}
