//! What a plugin worker writes on stderr, on the real binary: it reaches the server's log as
//! WARN lines naming the plugin, and no more than the log and the server can take. A line that
//! never ends costs the server's memory nothing; a flood of lines is logged at a bounded rate,
//! the rest counted; and bytes that are not UTF-8 do not stop the reading (after which the
//! worker would block on a full pipe). What a library's constructor writes while the server
//! reads its manifest goes the same way.

use serde_json::{json, Value};

use crate::support::{
    binary::RunningBinary,
    host::{chat_at, HostConfig},
    ndjson::Stream,
    plugin_lib, status_kib,
    upstream::{ScriptedUpstream, Turn},
};

/// The real binary, with the built-ins and `hostile_tool` in workers.
fn start(upstream: &ScriptedUpstream) -> (tempfile::TempDir, RunningBinary, String) {
    let mut config = HostConfig::builtins().upstream(upstream);
    config.load.push(plugin_lib("rojos_test_hostile_tool"));
    config.plugins.push_str("isolation = \"worker\"\n");
    // Time to write and read a quarter of a GiB in a debug build.
    config.call_timeout_secs = 120.0;
    let dir = config.in_temp_folder();
    std::fs::create_dir_all(dir.path().join("storage/demo/root")).unwrap();
    let binary = RunningBinary::start(dir.path(), "info", &[]);
    let url = binary.url();
    (dir, binary, url)
}

/// One `hostile_tool` call with `args` in project `demo`; its result text.
async fn hostile(upstream: &ScriptedUpstream, url: &str, args: Value) -> String {
    upstream.push([
        Turn::tool_calls(&[("h1", "hostile_tool", args)]),
        Turn::text("done"),
    ]);
    let run =
        Stream::read(chat_at(url, &json!({"projectId": "demo", "message": "go"})).await).await;
    assert_eq!(run.text(), "done", "the run went on to its answer");
    let results = run.results();
    assert!(results.len() == 1 && results[0].1, "{results:?}");
    results[0].2.clone()
}

#[tokio::test]
async fn a_stderr_line_that_never_ends_costs_the_server_no_memory() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let (_dir, binary, url) = start(&upstream);
    // The worker is started and the server warm before the peak is read.
    hostile(&upstream, &url, json!({"act": "pid"})).await;
    let before = status_kib(binary.id(), "VmHWM");

    let wrote = hostile(
        &upstream,
        &url,
        json!({"act": "stderr_line", "bytes": 256 << 20}),
    )
    .await;
    assert_eq!(wrote, format!("wrote {} bytes", 256 << 20));
    // The plugin returned once the pipe took its last bytes: all but 64 KiB were read.
    let grown_mib = status_kib(binary.id(), "VmHWM").saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "the server's peak memory grew by {grown_mib} MiB for one line of 256 MiB"
    );
    // The line's start is in the log, as the plugin's.
    RunningBinary::wait_for(
        &binary.stderr,
        &format!("plugin worker: {}", "e".repeat(300)),
        "the line's first 300 characters",
    );
}

#[tokio::test]
async fn a_flood_of_stderr_lines_is_logged_at_a_bounded_rate_and_bad_bytes_stop_nothing() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    let (_dir, binary, url) = start(&upstream);
    // A line that is not UTF-8, then 100,000 lines: far more than the pipe holds, so the
    // worker finishes only if the reading went on past the bad bytes.
    let written = hostile(
        &upstream,
        &url,
        json!({"act": "stderr_lines", "bytes": 100_000}),
    )
    .await;
    assert_eq!(written, "written");
    let log = RunningBinary::wait_for(
        &binary.stderr,
        "the rest of this minute's are counted, not logged",
        "the note that the flood is no longer logged",
    );
    let logged = log.matches("plugin worker: hostile line ").count();
    assert!(
        logged <= 100,
        "{logged} of the plugin's lines were logged within a minute"
    );
    // The next call is served.
    hostile(&upstream, &url, json!({"act": "pid"})).await;
}

#[tokio::test]
async fn what_a_library_s_constructor_writes_at_load_reaches_the_log_bounded_too() {
    let upstream = ScriptedUpstream::start(Vec::new()).await;
    // No call is made: the only worker that opened the library is the one that read its
    // manifest when the server loaded it.
    let (_dir, binary, _url) = start(&upstream);
    let log = RunningBinary::wait_for(
        &binary.stderr,
        "plugin worker: note: hostile_tool's constructor ran in process",
        "the constructor's line, logged as a worker's",
    );
    assert!(
        log.lines()
            .filter(|l| l.contains("hostile_tool's constructor ran"))
            .all(|l| l.contains("WARN") && l.contains("plugin worker: ")),
        "every line of it went through the worker's log:\n{log}"
    );
}
