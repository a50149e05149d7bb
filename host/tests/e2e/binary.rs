//! The `rojos` binary as the build links it (`host/build.rs`).

use object::read::elf::{Dyn as _, FileHeader as _};

/// `DT_RELR`, the dynamic entry of packed relative relocations (`object` has no constant for
/// it yet).
const DT_RELR: u64 = 36;

/// The binary's dynamic entry `tag`, if it has one.
fn dynamic_entry(data: &[u8], tag: u64) -> Option<u64> {
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data).expect("an ELF file");
    let endian = header.endian().expect("its byte order");
    let sections = header.sections(endian, data).expect("its sections");
    let (dynamic, _) = sections
        .dynamic(endian, data)
        .expect("a readable dynamic section")
        .expect("a dynamic section");
    dynamic
        .iter()
        .find(|entry| entry.d_tag(endian) == tag)
        .map(|entry| entry.d_val(endian))
}

#[test]
fn the_binary_packs_its_relative_relocations_where_glibc_reads_them() {
    let data = std::fs::read(env!("CARGO_BIN_EXE_rojos")).expect("the rojos binary");
    let relr = dynamic_entry(&data, DT_RELR);
    let plain = dynamic_entry(&data, u64::from(object::elf::DT_RELACOUNT)).unwrap_or(0);
    if glibc_at_least(2, 36) {
        assert!(
            relr.is_some(),
            "no DT_RELR: host/build.rs did not pack the relocations"
        );
        // Unpacked, this binary has tens of thousands; the few left are not relative.
        assert!(
            plain < 1_000,
            "{plain} relative relocations left as RELA entries"
        );
    } else {
        assert!(relr.is_none(), "DT_RELR on a glibc that cannot read it");
    }
}

include!("../../build/glibc.rs");
