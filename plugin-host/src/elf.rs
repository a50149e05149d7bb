//! Checks that a file is a complete ELF shared library before anyone `dlopen`s it.
//!
//! `dlopen` of a half-written library crashed the host (SIGBUS) or "succeeded" on a 90 % file
//! (docs/security.md, "Only the server's user can put code in the server"), so every segment
//! and section must lie inside the file. Only the headers are read (the loader passes its copy
//! through an `object::ReadCache`), never the whole library.

use object::{
    elf,
    read::elf::{FileHeader, ProgramHeader, SectionHeader},
    Endianness, ReadRef,
};

use super::LoadFailure;

/// Accepts only a 64-bit ELF shared object whose headers, segments and sections all fit in
/// `data` (the whole file: a byte slice, or a `ReadCache` over it).
pub(crate) fn check_complete<'data, R: ReadRef<'data>>(data: R) -> Result<(), LoadFailure> {
    let damaged = |e: object::Error| LoadFailure::Incomplete(e.to_string());
    let len = data
        .len()
        .map_err(|()| LoadFailure::Incomplete("its size cannot be read".to_owned()))?;
    if data.read_bytes_at(0, 4).ok() != Some(&elf::ELFMAG[..]) {
        return Err(LoadFailure::NotALibrary(match len {
            0 => "empty file".to_owned(),
            n => format!("not an ELF file ({n} bytes)"),
        }));
    }
    let header = elf::FileHeader64::<Endianness>::parse(data).map_err(damaged)?;
    let endian = header.endian().map_err(damaged)?;
    if header.e_type(endian) != elf::ET_DYN {
        return Err(LoadFailure::NotALibrary(
            "an ELF file, but not a shared library".to_owned(),
        ));
    }
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
        let Some((offset, size)) = section.file_range(endian) else {
            continue; // SHT_NOBITS: no bytes in the file
        };
        let end = offset.saturating_add(size);
        if end > len {
            return Err(LoadFailure::Incomplete(format!(
                "a section ends at byte {end} of a {len}-byte file"
            )));
        }
    }
    Ok(())
}
