//! Checks that a file is a complete ELF shared library before anyone `dlopen`s it.
//!
//! `dlopen` of a half-written library crashed the host (SIGBUS) or "succeeded" on a 90 % file
//! (docs/security.md, "Only the server's user can put code in the server"), so every segment
//! and section must lie inside the bytes we read.

use object::{
    elf,
    read::elf::{FileHeader, ProgramHeader, SectionHeader},
    Endianness,
};

use super::LoadFailure;

/// Accepts only a 64-bit ELF shared object whose headers, segments and sections all fit.
pub(crate) fn check_complete(data: &[u8]) -> Result<(), LoadFailure> {
    if data.len() < 4 || data[..4] != elf::ELFMAG[..] {
        return Err(LoadFailure::NotALibrary(match data.len() {
            0 => "empty file".to_owned(),
            n => format!("not an ELF file ({n} bytes)"),
        }));
    }
    let damaged = |e: object::Error| LoadFailure::Incomplete(e.to_string());
    let header = elf::FileHeader64::<Endianness>::parse(data).map_err(damaged)?;
    let endian = header.endian().map_err(damaged)?;
    if header.e_type(endian) != elf::ET_DYN {
        return Err(LoadFailure::NotALibrary(
            "an ELF file, but not a shared library".to_owned(),
        ));
    }
    let len = data.len() as u64;
    for segment in header.program_headers(endian, data).map_err(damaged)? {
        let end = segment
            .p_offset(endian)
            .saturating_add(segment.p_filesz(endian));
        if end > len {
            return Err(LoadFailure::Incomplete(format!(
                "a segment ends at byte {end} of a {len}-byte file"
            )));
        }
    }
    let sections = header.sections(endian, data).map_err(damaged)?;
    for section in sections.iter() {
        if section.sh_type(endian) != elf::SHT_NOBITS {
            section.data(endian, data).map_err(damaged)?;
        }
    }
    Ok(())
}
