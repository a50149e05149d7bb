//! Links the `rojos` binary with packed relative relocations (`-z pack-relative-relocs`,
//! `DT_RELR`) when the build machine's C library is glibc 2.36 or later, the first to
//! understand them, and the binary is built for that machine.
//!
//! A position-independent executable lists every pointer the dynamic loader must adjust at
//! start. As plain `RELA` entries (24 bytes each) the list was 1.1 MB for this binary, read
//! whole at every start and then counted in the idle RSS; packed, it is 14 KB
//! (`bench/PROFILE.md`, fifth round). A binary linked this way needs glibc 2.36 or later where
//! it runs, as a binary generally needs the glibc it was built against; older ones refuse to
//! start it with a clear message (`version 'GLIBC_ABI_DT_RELR' not found`), never run it
//! wrongly.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/glibc.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target == host && target.ends_with("-linux-gnu") && glibc_at_least(2, 36) {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

include!("build/glibc.rs");
