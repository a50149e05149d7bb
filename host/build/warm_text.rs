// Shared by `host/build.rs` and the test that checks what it placed
// (`host/tests/e2e/binary.rs`), through `include!`: a build script cannot use the crate it
// builds.

/// How many of the list's names an unoptimised build places (`host/build.rs`'s module doc).
const UNOPTIMISED_NAMES: usize = 32;

/// The function names of `host/link/warm-functions.txt`: one a line, `*` where rustc's hashes
/// were, `#` starting a comment.
fn warm_names(list: &str) -> impl Iterator<Item = &str> {
    list.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// A linker script that puts the sections of the list's first `names` functions, in the
/// list's order, at the front of `.text`. Functions are compiled into sections of their own:
/// `.text.<symbol>`, or `.text.unlikely.<symbol>` for those LLVM deems cold (such as `main`,
/// which runs once). The linker adds every other code section to `.text` after them, as it
/// would without the script; `.text` stays the one code section, which tools that read only
/// it (Valgrind among them) need.
#[allow(dead_code)] // the test reads the list, not the script
fn warm_text_script(list: &str, names: usize) -> String {
    let mut script = String::from("SECTIONS {\n  .text : {\n");
    for name in warm_names(list).take(names) {
        script.push_str(&format!("    *(.text.{name} .text.unlikely.{name})\n"));
    }
    script.push_str("  }\n} INSERT BEFORE .init;\n");
    script
}
