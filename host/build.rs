//! Links the `rojos` binary so that less of it is read and kept in memory at start:
//!
//! - **Packed relative relocations** (`-z pack-relative-relocs`, `DT_RELR`) when the build
//!   machine's C library is glibc 2.36 or later, the first to understand them, and the binary
//!   is built for that machine. A position-independent executable lists every pointer the
//!   dynamic loader must adjust at start. As plain `RELA` entries (24 bytes each) the list was
//!   1.1 MB for this binary, read whole at every start and then counted in the idle RSS;
//!   packed, it is 14 KB. A binary linked this way needs glibc 2.36 or later where it runs, as
//!   a binary generally needs the glibc it was built against; older ones refuse to start it
//!   with a clear message (`version 'GLIBC_ABI_DT_RELR' not found`), never run it wrongly.
//! - **The warm code first**: the functions that run at start and on first use, listed in
//!   `link/warm-functions.txt`, are placed together at the front of the code, by a linker
//!   script made from that list. The kernel maps a binary's code 64 KiB around each page a
//!   process touches; spread over the whole 18 MB text, the few MB run at start kept about
//!   11 MB of it resident. The list names functions without the hash rustc
//!   adds to each symbol, so it survives a rebuild with other flags or dependencies; a name
//!   that no longer exists places nothing, and a function missing from the list stays where it
//!   was: the binary is the same program either way. `scripts/warm-functions` makes the list
//!   again (`bench/PROFILE.md`, sixth round).
//!
//!   The linker matches every code section against each name, which makes the link of an
//!   optimised build longer (`dist` 11 s instead of under 1, `--release` about 20 s).
//!   Unoptimised builds, with many times the sections, place only the list's first names
//!   (their link took 46 s with the whole list, about 4 with these); a few names still let
//!   the tests check the mechanism.
//!
//!   Only on `x86_64-unknown-linux-gnu` with rustc's own linker (`rust-lld`, its default
//!   there since 1.90), the one it was measured with; a build that names another linker in
//!   `RUSTFLAGS` does without.

use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/glibc.rs");
    println!("cargo::rerun-if-changed=build/warm_text.rs");
    println!("cargo::rerun-if-changed=link/warm-functions.txt");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target == host && target.ends_with("-linux-gnu") && glibc_at_least(2, 36) {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" || flags.contains("linker") || flags.contains("fuse-ld")
    {
        return;
    }
    let list = std::fs::read_to_string("link/warm-functions.txt")
        .expect("host/link/warm-functions.txt is part of the source");
    let optimised = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let names = if optimised {
        usize::MAX
    } else {
        UNOPTIMISED_NAMES
    };
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let script = Path::new(&out).join("warm-text.ld");
    std::fs::write(&script, warm_text_script(&list, names)).expect("OUT_DIR is writable");
    println!("cargo::rustc-link-arg-bins=-Wl,-T,{}", script.display());
}

include!("build/glibc.rs");
include!("build/warm_text.rs");
