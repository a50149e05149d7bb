//! A shared library whose constructor (an `.init_array` entry, which the dynamic loader runs
//! inside `dlopen`, before any symbol is looked up) writes the file named by the environment
//! variable `ROJOS_TEST_CTOR_MARKER`. It is not a rojos plugin at all: the trust tests use it
//! to see whether the host let the dynamic loader open a file, since a refused file must run
//! no code, and a file that is not a plugin runs its constructor all the same.

/// The environment variable naming the marker file.
pub const MARKER_VAR: &str = "ROJOS_TEST_CTOR_MARKER";

#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = write_marker;

extern "C" fn write_marker() {
    if let Some(path) = std::env::var_os(MARKER_VAR) {
        // Nothing to report to if this fails: the test sees the marker missing.
        let _ = std::fs::write(path, b"the constructor ran\n");
    }
}
