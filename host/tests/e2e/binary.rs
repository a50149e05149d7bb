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

/// The binary's defined function symbols with their addresses, and the address range of its
/// `.text` section.
fn functions_and_text(data: &[u8]) -> (Vec<(String, u64)>, std::ops::Range<u64>) {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let file = object::File::parse(data).expect("an ELF file");
    let functions = file
        .symbols()
        .filter(|symbol| symbol.kind() == object::SymbolKind::Text && symbol.is_definition())
        .filter_map(|symbol| Some((symbol.name().ok()?.to_owned(), symbol.address())))
        .collect();
    let text = file.section_by_name(".text").expect("a .text section");
    (functions, text.address()..text.address() + text.size())
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[test]
fn the_functions_run_at_start_are_placed_together_ahead_of_the_rest() {
    let data = std::fs::read(env!("CARGO_BIN_EXE_rojos")).expect("the rojos binary");
    let (functions, text) = functions_and_text(&data);
    // This test's build is unoptimised, so only the list's first names were placed.
    let first: Vec<&str> = warm_names(include_str!("../../link/warm-functions.txt"))
        .take(UNOPTIMISED_NAMES)
        .collect();
    let (listed, rest): (Vec<_>, Vec<_>) = functions
        .iter()
        .filter(|(_, address)| text.contains(address))
        .partition(|(symbol, _)| first.iter().any(|name| matches(name, symbol)));
    assert!(
        listed.len() >= UNOPTIMISED_NAMES / 2,
        "only {} functions of the list's first {UNOPTIMISED_NAMES} names are in the binary",
        listed.len()
    );
    let (last, last_at) = listed
        .iter()
        .max_by_key(|(_, address)| *address)
        .expect("some");
    let (first_other, other_at) = rest
        .iter()
        .min_by_key(|(_, address)| *address)
        .expect("some");
    assert!(
        last_at < other_at,
        "the listed {last} (at {last_at:#x}) comes after {first_other} (at {other_at:#x}), \
         which is not listed: host/build.rs did not put the listed functions first"
    );
}

#[test]
fn the_warm_function_list_names_functions_the_binary_still_has() {
    let data = std::fs::read(env!("CARGO_BIN_EXE_rojos")).expect("the rojos binary");
    let (functions, _) = functions_and_text(&data);
    // The list comes from the optimised build, which inlines more, so a few of its names (LTO's
    // and the C compiler's local copies) have no counterpart here: 97 % matched when it was made.
    let names: Vec<&str> = warm_names(include_str!("../../link/warm-functions.txt")).collect();
    let mut symbols: Vec<&str> = functions
        .iter()
        .map(|(symbol, _)| symbol.as_str())
        .collect();
    symbols.sort_unstable();
    let found = names
        .iter()
        .filter(|name| {
            // The symbols that begin with the name's text before its first `*`, then the glob.
            let prefix = name.split('*').next().unwrap_or_default();
            let from = symbols.partition_point(|symbol| *symbol < prefix);
            symbols[from..]
                .iter()
                .take_while(|symbol| symbol.starts_with(prefix))
                .any(|symbol| matches(name, symbol))
        })
        .count();
    assert!(
        found * 10 >= names.len() * 8,
        "only {found} of the {} functions in host/link/warm-functions.txt are in the binary: \
         the list is stale, so the deployment build keeps more of its code in memory; make it \
         again with scripts/warm-functions",
        names.len()
    );
}

include!("../../build/warm_text.rs");
