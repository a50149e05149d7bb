//! The harness: where the built plugin libraries are, and a host started on loopback.

pub mod bearer_proxy;
pub mod binary;
pub mod held_fs;
pub mod host;
pub mod hostile;
pub mod ndjson;
pub mod nginx;
pub mod overflow;
pub mod pgbouncer;
pub mod pty;
pub mod seed;
pub mod server_info;
pub mod upstream;

use std::path::PathBuf;

use serde_json::{json, Value};

use host::{HostConfig, TestHost};
use upstream::{ScriptedUpstream, Turn};

/// A `POST /chat` body sending `text` to project `demo`.
pub fn demo_message(text: &str) -> Value {
    json!({"projectId": "demo", "message": text})
}

/// A host with the built-in plugins whose provider is a scripted upstream playing `turns`.
pub async fn builtins_host_with(turns: Vec<Turn>) -> (TestHost, ScriptedUpstream) {
    let upstream = ScriptedUpstream::start(turns).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;
    (host, upstream)
}

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

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in:\n{status}"))
}
