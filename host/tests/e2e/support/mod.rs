//! The harness: where the built plugin libraries are, and a host started on loopback.

pub mod bearer_proxy;
pub mod binary;
pub mod host;
pub mod ndjson;
pub mod nginx;
pub mod pty;
pub mod seed;
pub mod upstream;

use std::path::PathBuf;

/// The folder holding the workspace's built libraries (`target/debug` or the profile the
/// tests were built with), found from the test executable's own location.
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/e2e-<hash>
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps")
        .to_owned()
}

/// The built plugin library of crate lib `name` (e.g. `rojos_tool_list_files`).
pub fn plugin_lib(name: &str) -> PathBuf {
    let path = build_dir().join(format!("lib{name}.so"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins first with `cargo build --workspace`",
        path.display()
    );
    path
}

/// The five built-in tools, in the order the default config lists them.
pub const BUILTIN_TOOLS: [&str; 5] = [
    "read_path_meta",
    "get_text_content",
    "write_text_content",
    "list_files",
    "create_directory",
];

/// The built libraries of the five built-in tools.
pub fn builtin_libs() -> Vec<PathBuf> {
    BUILTIN_TOOLS
        .iter()
        .map(|t| plugin_lib(&format!("rojos_tool_{t}")))
        .collect()
}
