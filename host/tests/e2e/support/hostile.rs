//! Calls of `hostile_tool` (test-plugins/hostile_tool) through a chat, and the processes they
//! leave: what the worker isolation tests share.

use std::{os::unix::ffi::OsStrExt, path::Path};

use serde_json::{json, Value};

use super::{
    host::TestHost,
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// One chat in `project` (its folder made first) calling `hostile_tool` with `args`: whether
/// it succeeded, the result. The run must go on to its answer whatever the call did.
pub async fn call(
    host: &TestHost,
    upstream: &ScriptedUpstream,
    project: &str,
    args: Value,
) -> (bool, String) {
    std::fs::create_dir_all(host.project_root(project)).unwrap();
    upstream.push([
        Turn::tool_calls(&[("h1", "hostile_tool", args)]),
        Turn::text("done"),
    ]);
    let stream = Stream::read(
        host.chat(json!({"projectId": project, "message": "go"}))
            .await,
    )
    .await;
    let (_, ok, result) = stream.results()[0].clone();
    assert_eq!(stream.text(), "done", "the run went on to its answer");
    (ok, result)
}

/// The pid of the worker serving `project` (it runs the call).
pub async fn worker_pid(host: &TestHost, upstream: &ScriptedUpstream, project: &str) -> u32 {
    let (ok, result) = call(host, upstream, project, json!({"act": "pid"})).await;
    assert!(ok, "{result}");
    result
        .parse()
        .unwrap_or_else(|_| panic!("not a pid: {result}"))
}

/// The live processes whose command line starts with `program` and whose name is `comm`
/// (a zombie's command line is empty, so an ended process is not one).
pub fn processes(program: &Path, comm: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).next() == Some(program.as_os_str().as_bytes())
            && name.trim_end() == comm
        {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` has ended (gone, or a zombie not reaped yet).
pub fn has_ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |status| {
        status
            .lines()
            .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')))
    })
}

/// Polls `check` every 50 ms until it holds, or panics after a generous 60 s.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("still not so after 60 s: {what}");
}
